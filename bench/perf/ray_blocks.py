#!/usr/bin/env python3
"""Wall time of a sweep's blocks on 1 vs N local Ray nodes, and what the Ray layer costs a sample.

Usage: python bench/perf/ray_blocks.py [--nodes 3] [--per-class 8] [--max-tokens 32] [--quick]
                                       [--json FILE]

A local Ray cluster (`ray.cluster_utils.Cluster`, every node a raylet on 127.0.0.1 holding one
`box`) runs a sweep — the baseline and one faster setting, each at concurrency 1 and 4, two
rounds, two seed-like classes of `--per-class` prompts — as `--nodes` blocks, each block with its
own paced stand-in server (tests/support/paced_server.py: 500 and 700 tokens/s, known truth).
Once on one node (the blocks one after the other) and once on `--nodes` nodes (in parallel): the
wall time of each, and the driver's own CPU time (its process: applying every node's messages,
Ray's client threads) per sample it received. `--quick`: 2 nodes, 2 prompts a class, so the
suite can run it and no figure rots.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before ray.cluster_utils: keep 127.0.0.1
from ray.cluster_utils import Cluster

from kbgen.bench import command

ROOT = Path(__file__).resolve().parents[2]
PACED = ROOT / "tests" / "support" / "paced_server.py"
NODE: dict[str, Any] = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}


def spec(folder: Path, blocks_: int, per_class: int, max_tokens: int, port: int) -> Path:
    prompts = folder / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"class": c, "prompt": f"{c} prompt {i}"}) + "\n"
            for c in ("coding", "math")
            for i in range(per_class)
        )
    )
    data = {
        "schema_version": 1,
        "id": "ray-blocks",
        "title": "a sweep's blocks over local Ray nodes",
        "hypothesis": {
            "statement": "faster",
            "primary_metric": "decode_tok_s",
            "direction": "increase",
            "minimum_effect": 0.05,
        },
        "server": {
            "launcher": "process",
            "command": [sys.executable, str(PACED)],
            "model": "paced",
            "port": port,
            "startup_timeout_s": 60,
        },
        "baseline": "base",
        "variants": {"base": {"args": ["--rate", "500"]}, "fast": {"args": ["--rate", "700"]}},
        "sweep": {"workload.concurrency": [1, 4]},
        "workload": {
            "prompts": str(prompts),
            "classes": ["coding", "math"],
            "max_tokens": max_tokens,
            "warmup": 1,
            "repeats": 1,
            "rounds": 2,
        },
        "cluster": {"blocks": blocks_, "num_cpus": 1, "resources": {"box": 1}},
    }
    path = folder / "spec.yaml"
    path.write_text(json.dumps(data))
    return path


def timed(nodes: int, blocks_: int, per_class: int, max_tokens: int, port: int) -> dict[str, float]:
    """One run of `blocks_` blocks on a fresh cluster of `nodes` nodes: its figures."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, **NODE})
    try:
        for _ in range(nodes):
            cluster.add_node(**NODE, resources={"box": 1})
        cluster.wait_for_nodes()
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            run = command.prepare(
                spec(folder, blocks_, per_class, max_tokens, port),
                None,
                folder / "runs",
                cluster.address,
            )
            cpu, wall = time.process_time(), time.perf_counter()
            command.execute(run, cluster.address, None, lambda line: None)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            samples = sum(len(b.samples()) for b in run.folder.blocks())
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]
    return {
        "nodes": nodes,
        "wall_s": round(wall, 2),
        "samples": samples,
        "driver_cpu_s": round(cpu, 3),
        "driver_cpu_ms_per_sample": round(cpu / samples * 1000, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--per-class", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    a = parser.parse_args()
    if a.quick:
        a.nodes, a.per_class = 2, 2
    one = timed(1, a.nodes, a.per_class, a.max_tokens, 18910)
    many = timed(a.nodes, a.nodes, a.per_class, a.max_tokens, 18930)
    figures = {
        "blocks": a.nodes,
        "per_class": a.per_class,
        "max_tokens": a.max_tokens,
        "one_node": one,
        "many_nodes": many,
        "speed_up": round(one["wall_s"] / many["wall_s"], 2),
    }
    for name, f in (("1 node", one), (f"{a.nodes} nodes", many)):
        print(
            f"{a.nodes} blocks on {name}: {f['wall_s']:.1f} s wall, {f['samples']} samples, "
            f"driver CPU {f['driver_cpu_s']:.2f} s "
            f"({f['driver_cpu_ms_per_sample']:.2f} ms a sample)"
        )
    print(f"speed-up: {figures['speed_up']}x")
    if a.json:
        a.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
