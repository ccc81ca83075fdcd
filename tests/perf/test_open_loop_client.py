"""bench/perf/open_loop_client.py in its quick mode: kbgen's client sends Poisson schedules at 50
and 200 requests/s to a fake server whose streams stay open, every request answered whole, and
says how late it sent them and how many were open at once."""

from __future__ import annotations

from pathlib import Path

from tests.support.perf import quick


def test_the_client_keeps_an_open_loop_schedule_and_says_how_well(tmp_path: Path) -> None:
    figures = quick("open_loop_client.py", tmp_path)
    rows = figures["rows"]
    assert [(r["rate"], r["client"]) for r in rows] == [(50, "kbgen x1"), (200, "kbgen x1")]
    for row in rows:
        assert row["requests"] == 2 * row["rate"]  # two seconds of schedule
        assert 0 <= row["lag_p50_ms"] <= row["lag_p99_ms"]
        assert row["cpu_us_per_request"] > 0
    # streams that stay open: at four times the rate, more are open at once
    assert rows[1]["most_open"] > rows[0]["most_open"] > 1
