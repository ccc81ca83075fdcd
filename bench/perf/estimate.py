#!/usr/bin/env python3
"""What `kbgen bench --estimate` said a run would cost, against what the run then cost.

Usage: python bench/perf/estimate.py SPEC --records DIR [--runs DIR] [--json FILE]

The estimate is made from the measured records in DIR on the spec's model and hardware, as
`kbgen bench SPEC --estimate --records DIR` makes it (`record.estimate.estimate`); then
`kbgen bench SPEC` runs for real and `kbgen record` records it in a scratch knowledge base, and
its `cost` is read back. Printed: a server start's seconds and a window's seconds, estimated and
as spent (their ratio), the starts and windows the run made, and where it stopped. Timings of a
real server vary with the machine's load, so they are figures here, never a test's assertion;
tests/perf/test_estimate.py runs this on the tiny model and checks only that the figures are
there and hang together.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from kbgen.bench import provenance
from kbgen.kb import loading
from kbgen.kb.models import Record
from kbgen.kb.store import load_fast
from kbgen.record.estimate import estimate
from kbgen.run import prompts
from kbgen.run.spec import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", type=Path)
    parser.add_argument("--records", type=Path, required=True)
    parser.add_argument("--runs", type=Path, default=None)
    parser.add_argument("--json", type=Path)
    a = parser.parse_args()
    spec = load(a.spec)
    w = spec.workload
    suite = prompts.load(Path(w.prompts or ""), w.classes, w.per_class)
    hardware = provenance.server_hardware(spec.server)[0] or spec.hardware
    planned = estimate(
        spec,
        min(len(suite[c]) for c in w.classes),
        hardware,
        loading.load([a.records]).records.values(),
    )
    with tempfile.TemporaryDirectory() as scratch:
        runs = a.runs or Path(scratch) / "runs"
        kbgen = [sys.executable, "-m", "kbgen"]
        ran = subprocess.run(
            [*kbgen, "bench", str(a.spec), "--runs", str(runs)],
            check=True,
            capture_output=True,
            text=True,
        )
        run = ran.stdout.strip().splitlines()[-1]
        records = Path(scratch) / "records"
        made = subprocess.run(
            [*kbgen, "record", run, "--records", str(records)],
            check=True,
            capture_output=True,
            text=True,
        )
        record = Record.model_validate(load_fast(Path(made.stdout.strip())))
    spent = record.cost
    assert spent is not None
    startup_s = 60 * spent.startup_minutes / spent.starts if spent.starts else None
    window_s = 60 * spent.window_minutes / spent.windows if spent.windows else None
    figures: dict[str, object] = {
        "records": planned.records,
        "startup_s_estimated": planned.startup_s,
        "startup_s_spent": startup_s,
        "window_s_estimated": planned.window_s(),
        "window_s_spent": window_s,
        "starts": spent.starts,
        "windows": spent.windows,
        "planned_windows": spent.planned_windows,
        "stopped_round": spent.stopped.round if spent.stopped else None,
        "outcome": record.verdict.outcome if record.verdict else None,
    }
    for what, estimated, actual in (
        ("a server start", planned.startup_s, startup_s),
        ("a window", planned.window_s(), window_s),
    ):
        ratio = f"{actual / estimated:.2f}x" if estimated and actual else "-"
        print(f"{what}: estimated {estimated} s, spent {actual} s ({ratio} the estimate)")
    print(
        f"{spent.starts} start(s), {spent.windows} of {spent.planned_windows} windows, "
        f"stopped in round {figures['stopped_round']}, {figures['outcome']}"
    )
    if a.json:
        a.json.write_text(json.dumps(figures, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
