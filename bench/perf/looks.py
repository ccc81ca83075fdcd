#!/usr/bin/env python3
"""Time one look of a run that stops when decided, on a sweep's run folder as kbgen bench wrote it.

Usage: python bench/perf/looks.py [--settings 4] [--loads 3] [--per-class 10] [--rounds 4]
                                  [--quick] [--json FILE]

`kbgen bench` runs a stopping sweep (the baseline and n-gram at `--settings` draft lengths, each
at `--loads` concurrency levels, three seed classes of `--per-class` prompts, 128 tokens, at
most `--rounds` rounds) against bench/perf/fake_vllm.py, whose arms are all alike, so it runs to
its budget; then the look the driver makes at a round's end (`record.stopping.looker`) is timed
on the finished folder, the most a look reads in that run: its median of 5 and peak memory.
`--quick` runs a 2 x 2 sweep of 2 prompts a class, so the suite can run it and no figure rots.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from kbgen.record import stopping
from kbgen.run import spec as specs
from kbgen.run.folder import RunFolder

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from sweep_record import arguments, fake_vllm, kbgen  # noqa: E402  (the sibling: one way to run kbgen)
from sweep_record import spec as sweep_spec  # noqa: E402


def main() -> None:
    a = arguments(__doc__, rounds=4)
    if a.quick:
        a.rounds = 2
    with fake_vllm() as url, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = sweep_spec(url, a.settings, a.loads, a.per_class, a.rounds)
        data["workload"]["stop"] = "when-decided"  # type: ignore[index]
        (work / "sweep.yaml").write_text(yaml.safe_dump(data))
        ran, bench_s, _ = kbgen("bench", str(work / "sweep.yaml"), "--runs", str(work / "runs"))
        folder = RunFolder.open(Path(ran.strip().splitlines()[-1]))
        look = stopping.looker(specs.load(folder.spec_path), folder)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            found = look(a.rounds - 1)
            times.append(time.perf_counter() - started)
        samples = len(folder.samples())
        stopped = folder.meta().stopped
    figures = {
        "arms": a.settings + 1,
        "loads": a.loads,
        "prompts_per_class": a.per_class,
        "rounds": a.rounds,
        "samples": samples,
        "bench_s": round(bench_s, 2),
        "stopped": stopped is not None,
        "decided": found.decided,
        "look_ms_median": round(statistics.median(times) * 1000, 1),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(figures, indent=2))
    if a.json:
        a.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
