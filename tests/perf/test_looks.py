"""bench/perf/looks.py in its quick mode: a stopping sweep benched on the fake server and one
look timed on its folder, so the benchmark of a look cannot rot (figures printed, not
asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "bench" / "perf" / "looks.py"


def test_looks_quick_times_a_look_on_a_stopping_sweep(tmp_path: Path) -> None:
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
    assert (figures["arms"], figures["loads"], figures["rounds"]) == (3, 2, 2)
    # the fake server's arms are alike, 2 prompts a class decide nothing: the whole budget ran
    assert figures["samples"] == 3 * 2 * 2 * 3 * 2 and not figures["stopped"]
    assert not figures["decided"] and figures["look_ms_median"] > 0
