"""Time what users wait for: validate and render against the YAML parse floor, the pre-commit
hook after one record changed, and the whole publish with MkDocs and with Zensical.

Usage: python bench/perf/publish.py [--records 1000 10000] [--repeat 3] [--cold-repeat N]
       [--skip-cold] [--builders-up-to 1000] [--builder-timeout 900] [--dir DIR] [--quick]
       [--json FILE]

The knowledge base is `kb_scale.make_kb`'s mixed shape (the example's records, sweeps included,
with their samples), in a git repository with the site `kbgen init` writes (its `mkdocs.yml`,
the same file Zensical reads), committed on `main` as a team keeps it. Each figure is the median
wall time of `--repeat` runs of the real command (a subprocess, interpreter start included):

- **floor**: every YAML file of the knowledge base parsed by PyYAML's C loader (`CSafeLoader`),
  in this process and as a subprocess (interpreter start and `import yaml` included: the one
  kbgen's commands are compared with, as they pay the same start);
- **validate cold** (`kbgen validate --no-cache`) and **render cold** (`kbgen render`, no cache,
  no pages), each over the subprocess floor (targets: at most 2× and 5×);
- **pre-commit**: what the hook `kbgen init` installs runs, `kbgen render` then `kbgen check`,
  with nothing changed (the hook's floor), after one record's words are edited (its title: its
  numbers are as on `main`, so nothing is recomputed), and after one new record is added (its
  numbers recomputed from its samples, as `kbgen check` does for a record `main` lacks), each
  for an A/B record and a sweep (target: under 1 s at 1,000 records, 3 s at 10,000);
- **publish**: `kbgen render` (cold) then `mkdocs build --strict` or `zensical build --strict`
  (the Makefile's `site` and `site-zensical`), kbgen's share and the builder's; only up to
  `--builders-up-to` records, each build cut at `--builder-timeout` seconds.

`--skip-cold` leaves out the floor and the cold runs (to time the hook alone). `--quick` (a few
dozen records, one run each) runs in the test suite, so no figure here rots.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).parent))

from kb_scale import make_kb, run  # noqa: E402
from review_10k import git  # noqa: E402

TARGETS = {"validate_over_floor": 2.0, "render_over_floor": 5.0}
PRECOMMIT_TARGET_S = {1_000: 1.0, 10_000: 3.0}  # by records; between: the larger's
AB_SOURCE = "ngram-vs-baseline-h200-c1"  # a measured A/B record of the example
SWEEP_SOURCE = "ngram-sweep-h200-pinned"  # a measured sweep of the example
BUILDERS = {
    "mkdocs": ["mkdocs", "build", "--strict", "--quiet"],
    "zensical": ["zensical", "build", "--strict"],
}


def parse_all(folder: Path) -> int:
    """Every YAML file under `folder` parsed by PyYAML's C loader; how many."""
    count = 0
    for path in sorted(folder.rglob("*.yaml")):
        with path.open("rb") as stream:
            yaml.load(stream, Loader=yaml.CSafeLoader)
        count += 1
    return count


FLOOR_SCRIPT = """
import sys, yaml
from pathlib import Path
for path in sorted(Path(sys.argv[1]).rglob("*.yaml")):
    with path.open("rb") as stream:
        yaml.load(stream, Loader=yaml.CSafeLoader)
"""


def median(times: list[float]) -> float:
    return statistics.median(times)


def start_site(root: Path) -> None:
    """The files `kbgen init` writes beside the records (the site, the hook), none rendered."""
    from kbgen.site.starter import GITIGNORE, contents, kit

    for rel, text in contents("bench knowledge base").items():
        path = root / rel
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    (root / ".gitignore").write_text(kit(GITIGNORE))  # no cache, no site/ committed


def clear_render(root: Path) -> None:
    """No render cache, no generated pages: the next render is cold."""
    shutil.rmtree(root / ".kbgen_cache", ignore_errors=True)
    for folder in ("records", "plans"):
        shutil.rmtree(root / "docs" / folder, ignore_errors=True)


def edit(path: Path, n: int) -> None:
    """A hand edit of a record's words: its title."""
    path.write_text(path.read_text().replace("title: ", f"title: Edit {n}, ", 1))


def add(path: Path, n: int) -> None:
    """A new record beside `path`: a copy under a new id, sharing its samples file."""
    rid = f"2026-12-31-new-{n:03d}-{path.stem[11:]}"
    text = path.read_text().replace(f"id: {path.stem}\n", f"id: {rid}\n", 1)
    (path.parent / f"{rid}.yaml").write_text(text)


# the changes the hook is timed after: one record's words edited, one new record
CHANGES = {"words": edit, "new": add}


def builder(name: str) -> str | None:
    """The builder's command next to this Python, or on PATH; None when it is not installed."""
    here = Path(sys.executable).with_name(name)
    return str(here) if here.exists() else shutil.which(name)


def timed_build(command: list[str], root: Path, timeout: float) -> float | None:
    """Wall time of one site build from scratch; None when it ran past `timeout`."""
    shutil.rmtree(root / "site", ignore_errors=True)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-3000:]!r}")
    return time.perf_counter() - start


def measure(n: int, args: argparse.Namespace) -> dict[str, Any]:
    kbgen = str(Path(sys.executable).with_name("kbgen"))
    repeat, cold = args.repeat, args.cold_repeat or args.repeat
    figures: dict[str, Any] = {
        "records": n,
        "repeat": repeat,
        "cold_repeat": cold,
        "cpus": os.cpu_count(),
    }
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        records = root / "records"
        make_kb(records, n, "mixed")
        start_site(root)
        yamls = list(records.rglob("*.yaml"))
        figures["files"] = len(yamls)
        figures["yaml_mb"] = round(sum(p.stat().st_size for p in yamls) / 1e6, 1)
        os.sync()
        if args.skip_cold:
            run([kbgen, "render"], root)
        else:
            cold_figures(figures, root, kbgen, cold)
        figures["pages"] = sum(1 for _ in (root / "docs").rglob("*.md"))
        precommit_figures(figures, root, kbgen, repeat)
        if n <= args.builders_up_to:
            publish_figures(figures, root, kbgen, repeat, args.builder_timeout)
        else:
            for name in BUILDERS:
                figures[f"publish_{name}"] = f"not run over {args.builders_up_to} records"
    figures["load"] = os.getloadavg()
    return figures


def cold_figures(figures: dict[str, Any], root: Path, kbgen: str, cold: int) -> None:
    """The parse floor, and cold validate and render over it."""
    records = root / "records"
    parse_all(records)  # the page cache warm for every figure alike
    inproc = []
    for _ in range(cold):
        start = time.perf_counter()
        parse_all(records)
        inproc.append(time.perf_counter() - start)
    figures["floor_in_process"] = median(inproc)
    floor = [sys.executable, "-c", FLOOR_SCRIPT, "records"]
    figures["floor_subprocess"] = median([run(floor, root)[0] for _ in range(cold)])

    validate = [run([kbgen, "validate", "records", "--no-cache"], root) for _ in range(cold)]
    figures["validate_cold"] = median([wall for wall, _ in validate])
    figures["validate_cold_peak_mb"] = max(peak for _, peak in validate)
    render = []
    for _ in range(cold):
        clear_render(root)
        render.append(run([kbgen, "render"], root))
    figures["render_cold"] = median([wall for wall, _ in render])
    figures["render_cold_peak_mb"] = max(peak for _, peak in render)
    for name in ("validate", "render"):
        figures[f"{name}_over_floor"] = figures[f"{name}_cold"] / figures["floor_subprocess"]


def precommit_figures(figures: dict[str, Any], root: Path, kbgen: str, repeat: int) -> None:
    """The hook's `kbgen render` + `kbgen check` with nothing changed, and after one record's
    text changed, in a repository whose main branch holds the knowledge base, rendered."""
    records = root / "records"
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "main")
    run([kbgen, "check"], root)  # as on the commit before: its caches filled
    noop = [run([kbgen, "render"], root)[0] + run([kbgen, "check"], root)[0] for _ in "123"]
    figures["precommit_nothing_changed"] = median(noop)
    for change, how in CHANGES.items():
        for kind, source in (("ab", AB_SOURCE), ("sweep", SWEEP_SOURCE)):
            copies = sorted(records.glob(f"2026-*-copy-*-{source}.yaml"))[:repeat]
            renders, checks = [], []
            for i, path in enumerate(copies):
                how(path, i)
                renders.append(run([kbgen, "render"], root)[0])
                checks.append(run([kbgen, "check"], root)[0])
            name = f"precommit_{change}_{kind}"
            figures[f"{name}_render"] = median(renders)
            figures[f"{name}_check"] = median(checks)
            figures[name] = median([r + c for r, c in zip(renders, checks, strict=True)])
    n = figures["records"]
    target = next((s for m, s in sorted(PRECOMMIT_TARGET_S.items()) if n <= m), 3.0)
    figures["precommit_target_s"] = target


def publish_figures(
    figures: dict[str, Any], root: Path, kbgen: str, repeat: int, timeout: float
) -> None:
    """A cold `kbgen render`, then each site builder from scratch: their shares."""
    for name, command in BUILDERS.items():
        exe = builder(command[0])
        if exe is None:
            figures[f"publish_{name}"] = "not installed"
            continue
        kbgen_share, builds = [], []
        for _ in range(repeat):
            clear_render(root)
            kbgen_share.append(run([kbgen, "render"], root)[0])
            builds.append(timed_build([exe, *command[1:]], root, timeout))
        if any(b is None for b in builds):
            figures[f"publish_{name}"] = f"over {timeout:.0f} s"
            continue
        done = [b for b in builds if b is not None]
        figures[f"publish_{name}"] = {
            "kbgen": median(kbgen_share),
            "builder": median(done),
            "total": median([k + b for k, b in zip(kbgen_share, done, strict=True)]),
        }


def report(f: dict[str, Any]) -> list[str]:
    """The figures of one size as printed lines."""
    load = ", ".join(f"{x:.2f}" for x in f["load"])
    lines = [
        f"{f['records']} records (mixed, sweeps included): {f['files']} YAML files, "
        f"{f['yaml_mb']} MB; {f['cpus']} CPUs; median of {f['repeat']} (cold figures: "
        f"{f['cold_repeat']}); load after: {load}",
    ]
    if "floor_subprocess" in f:
        lines += [
            f"  C-loader floor, in process      {f['floor_in_process']:7.2f} s",
            f"  C-loader floor, subprocess      {f['floor_subprocess']:7.2f} s  (the ratios' base)",
        ]
    for name in ("validate", "render") if "floor_subprocess" in f else ():
        ratio, target = f[f"{name}_over_floor"], TARGETS[f"{name}_over_floor"]
        met = "met" if ratio <= target else "missed"
        lines.append(
            f"  {name} cold{'':<{20 - len(name)}}{f[f'{name}_cold']:7.2f} s  {ratio:4.1f}× floor "
            f"(target ≤ {target:.0f}×: {met}); {f[f'{name}_cold_peak_mb']:.0f} MB peak"
        )
    lines.append(
        f"  pre-commit, nothing changed      {f['precommit_nothing_changed']:7.2f} s  "
        "(render + check: the hook's floor here)"
    )
    for change in CHANGES:
        for kind in ("ab", "sweep"):
            name, target = f"precommit_{change}_{kind}", f["precommit_target_s"]
            total = f[name]
            lines.append(
                f"{f'  pre-commit, {change}, one {kind}':<35}{total:7.2f} s  = render "
                f"{f[f'{name}_render']:.2f} + check {f[f'{name}_check']:.2f} "
                f"(target < {target:.0f} s: {'met' if total < target else 'missed'})"
            )
    for name in BUILDERS:
        got = f[f"publish_{name}"]
        if isinstance(got, dict):
            share = got["kbgen"] / (got["kbgen"] + got["builder"])
            lines.append(
                f"  publish with {name:<9}         {got['total']:7.2f} s  = kbgen render "
                f"{got['kbgen']:.2f} ({share:.0%}) + {name} {got['builder']:.2f}"
            )
        else:
            lines.append(f"  publish with {name:<9}         {got}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (the median)")
    parser.add_argument(
        "--cold-repeat", type=int, metavar="N", help="runs per cold figure (default: --repeat)"
    )
    parser.add_argument(
        "--skip-cold", action="store_true", help="no floor, no cold validate or render"
    )
    parser.add_argument("--builders-up-to", type=int, default=1_000, metavar="N")
    parser.add_argument("--builder-timeout", type=float, default=900.0, metavar="S")
    parser.add_argument("--dir", help="make the knowledge base here (e.g. /dev/shm)")
    parser.add_argument("--quick", action="store_true", help="a few dozen records, one run")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.quick:
        args.records, args.repeat, args.builders_up_to = [30], 1, 30
    results = []
    for n in args.records:
        figures = measure(n, args)
        results.append(figures)
        print("\n".join(report(figures)), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
