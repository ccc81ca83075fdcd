#!/usr/bin/env python3
"""Time `kbgen record` and `kbgen record --check` on a sweep's run folder, as kbgen bench wrote it.

Usage: python bench/perf/sweep_record.py [--settings 4] [--loads 3] [--per-class 10]
                                         [--rounds 2] [--quick] [--json FILE]

`kbgen bench` runs the sweep (the baseline and n-gram at `--settings` draft lengths, each at
`--loads` concurrency levels, three seed classes of `--per-class` prompts, 128 tokens) against
bench/perf/fake_vllm.py (a fake vLLM that streams as fast as it is read), so the run folder is
kbgen's own; then `kbgen record` and `kbgen record --check` run as the user runs them (a
subprocess each, start-up included): their wall time and peak memory (RSS). `--quick` runs a
2 x 2 sweep of 2 prompts a class, so the suite can run it and no figure here can rot.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DRAFTS = [1, 2, 3, 5, 7, 9, 12, 16]
LEVELS = [1, 8, 32, 64, 128]


def spec(url: str, settings: int, loads: int, per_class: int, rounds: int) -> dict[str, object]:
    return {
        "schema_version": 1,
        "id": "sweep-perf",
        "title": "a sweep to time kbgen record on",
        "hypothesis": {
            "statement": "n-gram speeds decoding",
            "primary_metric": "decode_tok_s",
            "direction": "increase",
            "minimum_effect": 0.05,
        },
        "server": {"launcher": "external", "url": url},
        "baseline": "baseline",
        "variants": {
            "baseline": {},
            "ngram": {"speculative_config": {"method": "ngram", "num_speculative_tokens": 5}},
        },
        "sweep": {
            "ngram.speculative_config.num_speculative_tokens": DRAFTS[:settings],
            "workload.concurrency": LEVELS[:loads],
        },
        "workload": {
            "prompts": str(REPO / "bench" / "prompts" / "seed.jsonl"),
            "classes": ["coding", "math", "explanatory"],
            "per_class": per_class,
            "max_tokens": 128,
            "repeats": 1,
            "warmup": 1,
            "rounds": rounds,
        },
    }


def kbgen(*args: str) -> tuple[str, float, float]:
    """`kbgen ARGS`: its output, its wall time (s) and its own peak RSS (MB, from wait4)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbgen", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"kbgen {' '.join(args)} failed:\n{output}")
    return output, wall, usage.ru_maxrss / 1024


@contextlib.contextmanager
def fake_vllm() -> Iterator[str]:
    """bench/perf/fake_vllm.py running, as its URL; stopped afterwards."""
    source = subprocess.Popen(
        [sys.executable, str(HERE / "fake_vllm.py")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert source.stdout is not None
        line = source.stdout.readline()
        if not line.startswith("LISTENING "):
            raise SystemExit(f"fake server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        source.terminate()
        source.wait(10)


def arguments(doc: str, rounds: int) -> argparse.Namespace:
    """A sweep benchmark's command line (`--quick`: 2 settings x 2 loads x 2 prompts a class)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--settings", type=int, default=4)
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--per-class", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    a = parser.parse_args()
    if a.quick:
        a.settings, a.loads, a.per_class = 2, 2, 2
    return a


def main() -> None:
    a = arguments(__doc__, rounds=2)
    with fake_vllm() as url, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "sweep.yaml").write_text(
            yaml.safe_dump(spec(url, a.settings, a.loads, a.per_class, a.rounds))
        )
        ran, bench_s, _ = kbgen("bench", str(work / "sweep.yaml"), "--runs", str(work / "runs"))
        run = ran.strip().splitlines()[-1]
        made, record_s, record_mb = kbgen("record", run, "--records", str(work / "records"))
        path = made.strip().splitlines()[0]
        _, check_s, check_mb = kbgen("record", "--check", path)
        samples = len((Path(run) / "samples.jsonl").read_text().splitlines())
        cells = len(yaml.safe_load(Path(path).read_text())["verdict"]["cells"])
    figures = {
        "arms": a.settings + 1,
        "loads": a.loads,
        "prompts_per_class": a.per_class,
        "rounds": a.rounds,
        "samples": samples,
        "cells": cells,
        "bench_s": round(bench_s, 2),
        "record_s": round(record_s, 2),
        "record_peak_mb": round(record_mb, 1),
        "check_s": round(check_s, 2),
        "check_peak_mb": round(check_mb, 1),
    }
    print(json.dumps(figures, indent=2))
    if a.json:
        a.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
