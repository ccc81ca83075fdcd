"""Does a verdict replicate? Run the demo experiment twice, back to back, and compare the verdicts.

Usage:
    .venv/bin/python bench/replicate.py [SPEC] [--times N]      # bench N times (default 2)
    .venv/bin/python bench/replicate.py --runs RUN RUN ...      # re-record runs already made

Each run is made by the real `kbgen bench SPEC` (into runs/, like `make demo`) and recorded by the
real `kbgen record RUN` into a scratch records folder (the knowledge base is not touched), then
the per-class outcomes, effects and intervals of the runs are printed side by side. Two runs
contradict when one class is supported in one and refuted in the other; the script exits 1 then.
A machine busy with other work makes both runs noisier: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KBGEN = str(Path(sys.executable).with_name("kbgen"))
DEMO = REPO / "bench" / "experiments" / "ngram-vs-baseline.yaml"


def _kbgen(*args: str) -> str:
    done = subprocess.run([KBGEN, *args], cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"kbgen {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout.strip()


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("spec", nargs="?", type=Path, default=DEMO)
    parser.add_argument("--times", type=int, default=2, help="runs to make (default 2)")
    parser.add_argument("--runs", nargs="+", type=Path, help="record these runs instead")
    args = parser.parse_args()

    from kbgen.kb.documents import load_file
    from kbgen.kb.models import Record

    runs = args.runs or []
    for i in range(0 if args.runs else args.times):
        print(f"run {i + 1} of {args.times}: kbgen bench {args.spec}", file=sys.stderr, flush=True)
        runs.append(Path(_kbgen("bench", str(args.spec))))
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="kbgen-replicate-") as scratch:
        for n, run in enumerate(runs):
            records = Path(scratch) / f"records-{n}"
            (records / "plans").mkdir(parents=True)
            for plan in (REPO / "records" / "plans").glob("*.yaml"):  # the spec may resolve tasks
                (records / "plans" / plan.name).write_bytes(plan.read_bytes())
            path = Path(_kbgen("record", str(run), "--records", str(records)))
            record = load_file(path)
            assert isinstance(record, Record) and record.verdict is not None
            verdicts.append((run, record.verdict))

    classes = list(dict.fromkeys(c for _, v in verdicts for c in v.per_class))
    print(f"{'class':<14}" + "".join(f"{run.name[:44]:<46}" for run, _ in verdicts))
    contradictions = []
    for cls in classes:
        cells, outcomes = [], set()
        for _, verdict in verdicts:
            c = verdict.per_class.get(cls)
            if c is None:
                cells.append("(no verdict)")
                continue
            outcomes.add(str(c.outcome))
            cells.append(f"{c.outcome} {_fmt(c.effect)} [{_fmt(c.ci_low)}, {_fmt(c.ci_high)}]")
        print(f"{cls:<14}" + "".join(f"{cell:<46}" for cell in cells))
        if {"supported", "refuted"} <= outcomes:
            contradictions.append(cls)
    print(f"{'overall':<14}" + "".join(f"{v.outcome!s:<46}" for _, v in verdicts))
    for run, verdict in verdicts:
        for caveat in verdict.caveats:
            print(f"  {run.name}: {caveat}")
    if contradictions:
        print(
            f"CONTRADICTION in {', '.join(contradictions)}: supported in one run, refuted in "
            "another"
        )
        return 1
    print("no contradiction: no class is supported in one run and refuted in another")
    return 0


if __name__ == "__main__":
    sys.exit(main())
