"""bench/perf/publish.py in its quick mode: the floor, validate and render against it, the
pre-commit hook's path and the whole publish with both site builders, on every test run (the
figures are printed and checked for shape, never for time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PUBLISH = Path(__file__).parents[2] / "bench" / "perf" / "publish.py"


def test_publish_quick_times_every_step_and_splits_the_publish(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(PUBLISH), "--quick", "--json", str(out)],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,
    )
    [figures] = json.loads(out.read_text())
    assert figures["files"] > figures["records"] and figures["pages"] >= figures["records"]
    for name in ("floor_in_process", "floor_subprocess", "validate_cold", "render_cold"):
        assert figures[name] > 0, name
    for name in ("validate", "render"):
        assert (
            figures[f"{name}_over_floor"] == figures[f"{name}_cold"] / figures["floor_subprocess"]
        )
    assert figures["precommit_nothing_changed"] > 0
    for name in ("words_ab", "words_sweep", "new_ab", "new_sweep"):
        parts = figures[f"precommit_{name}_render"], figures[f"precommit_{name}_check"]
        assert all(part > 0 for part in parts) and figures[f"precommit_{name}"] > 0
    for builder in ("mkdocs", "zensical"):
        publish = figures[f"publish_{builder}"]
        if publish == "not installed":
            continue
        assert publish["kbgen"] > 0 and publish["builder"] > 0, builder
        assert abs(publish["total"] - publish["kbgen"] - publish["builder"]) < 1e-9
        assert f"publish with {builder}" in done.stdout
    assert "pre-commit, words, one sweep" in done.stdout
    assert "pre-commit, new, one sweep" in done.stdout
