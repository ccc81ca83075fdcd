"""Time `kbgen validate` and `kbgen render` on a knowledge base of records as kbgen writes them.

Usage: python bench/perf/kb_scale.py [--records N] [--broken N] [--dir DIR] [--quick] [--json FILE]

The records are copies of the example knowledge base's own (records/: the measured ones with
their samples files, hard-linked, and the reported Kimi-K2.5 one), each under a new id. Two
shapes: **mixed**, a realistic spread of questions (the model's name changes every
`PER_QUESTION` copies, so each question has a few replications), and **one question**, the
worst case for the replications pass (every copy of one measured record, so all answer the
same question). Each figure is the wall time of the real command (a subprocess, start-up
included) and the peak memory (RSS) of that run. `--quick` runs a few dozen records, so the
suite can run it and no figure here can rot.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "records"
ONE_QUESTION = "2026-12-01-ngram-vs-baseline"  # a measured record of the CPU demo
PER_QUESTION = 5  # copies of a record that share a question, in the mixed shape


def make_kb(folder: Path, n: int, shape: str) -> None:
    """The example knowledge base, and `n` copies of its records under new ids (`shape`:
    "mixed" or "one-question")."""
    shutil.copytree(EXAMPLE, folder)
    sources = sorted(EXAMPLE.glob("*.yaml"))
    if shape == "one-question":
        sources = [EXAMPLE / f"{ONE_QUESTION}.yaml"]
    texts = {path: path.read_text() for path in sources}
    for i in range(n):
        source = sources[i % len(sources)]
        rid = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}-copy-{i:05d}-{source.stem[11:]}"
        text = texts[source].replace(f"id: {source.stem}\n", f"id: {rid}\n", 1)
        if shape == "mixed":  # a new question every PER_QUESTION copies of one source
            group = i // (PER_QUESTION * len(sources))
            model = re.compile(r"(?m)^(  model:\n    name: )(.*)$")
            text = model.sub(rf"\g<1>\g<2>-{group}", text, count=1)
        samples = re.search(r"(?m)^  path: (\S+\.samples\.jsonl\.gz)$", text)
        if samples is not None:
            name = f"{rid}.samples.jsonl.gz"
            os.link(folder / samples[1], folder / name)
            text = text.replace(f"  path: {samples[1]}\n", f"  path: {name}\n", 1)
        (folder / f"{rid}.yaml").write_text(text)


def break_files(folder: Path, n: int) -> None:
    """`n` copies made invalid the ways a hand edit breaks them: a wrong type, a missing field,
    a YAML syntax error — each reported with its line."""
    faults: list[Callable[[str], str]] = [
        lambda text: text.replace("  primary_metric: decode_tok_s", "  primary_metric: speed", 1),
        lambda text: text.replace("status: concluded\n", "", 1),
        lambda text: text.replace("  direction: increase", "  direction: [increase", 1),
    ]
    copies = sorted(folder.glob("2026-*-copy-*.yaml"))[:n]
    for i, path in enumerate(copies):
        path.write_text(faults[i % len(faults)](path.read_text()))


def run(command: list[str], cwd: Path, ok: bool = True) -> tuple[float, float]:
    """Wall time (s) and peak RSS (MB) of one run of `command`."""
    start = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *command], cwd=cwd, capture_output=True, text=True
    )
    elapsed = time.perf_counter() - start
    if (done.returncode == 0) != ok:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    peak_kb = int(done.stderr.strip().splitlines()[-1])
    return elapsed, peak_kb / 1024


def measure(n: int, broken: int, shape: str, where: str | None) -> dict[str, object]:
    kbgen = str(Path(sys.executable).with_name("kbgen"))
    figures: dict[str, object] = {"records": n, "shape": shape, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        root = Path(tmp)
        make_kb(root / "records", n, shape)
        figures["yaml_mb"] = round(
            sum(p.stat().st_size for p in (root / "records").rglob("*.yaml")) / 1e6, 1
        )
        os.sync()
        validate = [kbgen, "validate", "records"]
        render = [kbgen, "render", "--records", "records", "--docs", "docs"]
        figures["validate_cold"] = run([*validate, "--no-cache"], root)
        figures["validate_filling_cache"] = run(validate, root)
        figures["validate_warm"] = min(run(validate, root) for _ in range(3))
        figures["render_cold"] = run(render, root)
        figures["render_noop"] = min(run(render, root) for _ in range(3))
        one = next((root / "records").glob("2026-*-copy-*.yaml"))
        one.write_text(one.read_text().replace("title: ", "title: Again, ", 1))
        figures["render_one_changed"] = run(render, root)
        figures["validate_one_changed"] = run(validate, root)
        figures["pages"] = sum(1 for _ in (root / "docs").rglob("*.md"))
        if broken:
            break_files(root / "records", broken)
            figures["broken"] = broken
            figures["validate_broken"] = run([*validate, "--no-cache"], root, ok=False)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--broken", type=int, default=1_000)
    parser.add_argument("--dir", help="make the knowledge base here (e.g. /dev/shm)")
    parser.add_argument("--shape", choices=["mixed", "one-question", "both"], default="both")
    parser.add_argument("--quick", action="store_true", help="a few dozen records")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    n, broken = (40, 10) if args.quick else (args.records, args.broken)
    shapes = ["mixed", "one-question"] if args.shape == "both" else [args.shape]
    results = []
    for shape in shapes:
        figures = measure(n, broken if shape == "mixed" else 0, shape, args.dir)
        results.append(figures)
        print(f"{n} records ({shape}), {figures['yaml_mb']} MB of YAML, {figures['cpus']} CPUs:")
        for name, value in figures.items():
            if isinstance(value, tuple):
                print(f"  {name:<20} {value[0]:7.2f} s  {value[1]:6.0f} MB peak")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
