"""bench/perf/looks.py in its quick mode: a stopping sweep benched on the fake server and one
look timed on its folder, so the benchmark of a look cannot rot (figures printed, not
asserted)."""

from __future__ import annotations

from pathlib import Path

from tests.support.perf import quick


def test_looks_quick_times_a_look_on_a_stopping_sweep(tmp_path: Path) -> None:
    figures = quick("looks.py", tmp_path)
    assert (figures["arms"], figures["loads"], figures["rounds"]) == (3, 2, 2)
    # the fake server's arms are alike, 2 prompts a class decide nothing: the whole budget ran
    assert figures["samples"] == 3 * 2 * 2 * 3 * 2 and not figures["stopped"]
    assert not figures["decided"] and figures["look_ms_median"] > 0
