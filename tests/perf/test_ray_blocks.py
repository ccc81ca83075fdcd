"""bench/perf/ray_blocks.py in its quick mode: a sweep's blocks on one node and on two, so the
benchmark of the Ray layer cannot rot (figures printed, not asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "bench" / "perf" / "ray_blocks.py"


def test_ray_blocks_quick_times_blocks_on_one_node_and_on_two(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    src = str(Path(__file__).parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        check=True,
        capture_output=True,
        timeout=600,
        env=env,
    )
    figures = json.loads(out.read_text())
    # 2 blocks x 2 arms x 2 loads x 2 rounds x 2 classes x 2 prompts, on each cluster
    assert figures["one_node"]["samples"] == figures["many_nodes"]["samples"] == 2 * 32
    assert figures["one_node"]["nodes"] == 1 and figures["many_nodes"]["nodes"] == 2
    assert figures["many_nodes"]["driver_cpu_ms_per_sample"] > 0
