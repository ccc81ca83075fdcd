"""bench/perf/sweep_record.py in its quick mode: a sweep benched on the fake server, recorded and
checked, so the benchmark of `kbgen record` on a sweep cannot rot (figures printed, not
asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "bench" / "perf" / "sweep_record.py"


def test_sweep_record_quick_times_record_and_check(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    figures = json.loads(out.read_text())
    assert (figures["arms"], figures["loads"], figures["prompts_per_class"]) == (3, 2, 2)
    assert figures["samples"] == 3 * 2 * 2 * 3 * 2  # arms x loads x rounds x classes x prompts
    assert figures["cells"] == 2 * 2 * 3  # variants x loads x classes
    assert all(figures[k] > 0 for k in ("record_s", "record_peak_mb", "check_s", "check_peak_mb"))
