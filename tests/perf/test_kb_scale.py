"""bench/perf/kb_scale.py and review_10k.py in their quick modes: the benchmarks of the knowledge
base's speed run on every test run, so none can rot (their figures are printed, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PERF = Path(__file__).parents[2] / "bench" / "perf"


def test_kb_scale_quick_times_every_command_on_both_shapes(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    subprocess.run(
        [sys.executable, str(PERF / "kb_scale.py"), "--quick", "--json", str(out)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    mixed, one = json.loads(out.read_text())
    assert (mixed["shape"], one["shape"]) == ("mixed", "one-question")
    timed = [
        "validate_cold",
        "validate_filling_cache",
        "validate_warm",
        "render_cold",
        "render_noop",
        "render_one_changed",
        "validate_one_changed",
    ]
    for figures in (mixed, one):
        assert figures["pages"] >= figures["records"]  # every copy has its page
        for name in timed:
            wall, peak = figures[name]
            assert wall > 0 and peak > 0, name
    assert mixed["broken"] > 0 and mixed["validate_broken"][0] > 0


def test_review_quick_times_diff_and_check() -> None:
    done = subprocess.run(
        [sys.executable, str(PERF / "review_10k.py"), "--quick"],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "kbgen diff (Markdown):" in done.stdout and "kbgen check, again:" in done.stdout
