"""bench/perf/ray_blocks.py in its quick mode: a sweep's blocks on one node and on two, so the
benchmark of the Ray layer cannot rot (figures printed, not asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.perf import quick


@pytest.mark.ray
def test_ray_blocks_quick_times_blocks_on_one_node_and_on_two(tmp_path: Path) -> None:
    figures = quick("ray_blocks.py", tmp_path)
    # 2 blocks x 2 arms x 2 loads x 2 rounds x 2 classes x 2 prompts, on each cluster
    assert figures["one_node"]["samples"] == figures["many_nodes"]["samples"] == 2 * 32
    assert figures["one_node"]["nodes"] == 1 and figures["many_nodes"]["nodes"] == 2
    assert figures["many_nodes"]["driver_cpu_ms_per_sample"] > 0
