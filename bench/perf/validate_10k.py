"""Time `kbgen validate` over 10,000 synthetic valid records (issue 2's target: under 2 s).

Usage: python bench/perf/validate_10k.py [N]

Prints the wall time of the real command (a subprocess, start-up included) and of the
in-process library call, and the peak memory of the subprocess.
"""

from __future__ import annotations

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


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    kbgen = Path(sys.executable).with_name("kbgen")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "records"
        make_kb(folder, n)
        size = sum(p.stat().st_size for p in folder.rglob("*.yaml"))
        print(f"{n} records, {size / 1e6:.1f} MB of YAML")
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            done = subprocess.run(
                [str(kbgen), "validate", str(folder), "--root", str(folder)],
                capture_output=True, text=True, check=False,
            )
            runs.append(time.perf_counter() - start)
            assert done.returncode == 0, done.stdout + done.stderr
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"kbgen validate (subprocess): best {min(runs):.2f} s, "
              f"runs {', '.join(f'{r:.2f}' for r in runs)}; peak RSS {peak:.0f} MB")
        from kbgen import kb

        start = time.perf_counter()
        base = kb.load([folder])
        elapsed = time.perf_counter() - start
        assert not base.problems and len(base.records) == n
        print(f"kb.load in process: {elapsed:.2f} s ({elapsed / n * 1e6:.0f} µs per record)")


if __name__ == "__main__":
    main()
