"""Time `kbgen validate` over 10,000 synthetic valid records (issue 2's target: under 2 s).

Usage: python bench/perf/validate_10k.py [N]

Prints the wall time of the real command (a subprocess, start-up included) and of the
in-process library call, and the peak memory of the subprocess.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.conftest import PLAN, RECORD  # noqa: E402  (the fixture record: ~60 lines, ~1.5 KB)


def make_kb(folder: Path, n: int) -> None:
    (folder / "plans").mkdir(parents=True)
    (folder / "plans" / "next-steps.yaml").write_text(PLAN)
    for i in range(n):
        rid = f"2026-11-{1 + i % 28:02d}-synthetic-{i:05d}"
        text = RECORD.replace("id: ngram-test", f"id: {rid}").replace(
            "mean: 62.6", f"mean: {50 + (i % 300) / 10}"
        )
        (folder / f"{rid}.yaml").write_text(text)


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stdout + done.stderr
    return elapsed


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    kbgen = str(Path(sys.executable).with_name("kbgen"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "records"
        make_kb(folder, n)
        size = sum(p.stat().st_size for p in folder.rglob("*.yaml"))
        print(f"{n} records, {size / 1e6:.1f} MB of YAML, {os.cpu_count()} CPUs")
        validate = [kbgen, "validate", str(folder), "--root", str(folder)]
        cold = [timed([*validate, "--no-cache"], Path(tmp)) for _ in range(2)]
        first = timed(validate, Path(tmp))  # fills .kbgen_cache/
        warm = [timed(validate, Path(tmp)) for _ in range(3)]
        touched = folder / next(p.name for p in folder.glob("2026-*.yaml"))
        touched.write_text(touched.read_text().replace("mean: 62.6", "mean: 63.0"))
        one_changed = timed(validate, Path(tmp))
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"kbgen validate, cold (--no-cache): best {min(cold):.2f} s of {_list(cold)}")
        print(f"kbgen validate, first run filling the cache: {first:.2f} s")
        print(f"kbgen validate, warm (nothing changed): best {min(warm):.2f} s of {_list(warm)}")
        print(f"kbgen validate, one file changed: {one_changed:.2f} s")
        print(f"peak RSS of one run: {peak:.0f} MB")


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    main()
