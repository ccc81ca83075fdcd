"""bench/perf/index_10k.py in its quick mode, so that it cannot rot: the index of 200 records."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kbgen
from tests.conftest import REPO


def test_quick_mode_renders_and_measures_the_index() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "perf" / "index_10k.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PYTHONPATH": str(Path(kbgen.__file__).parents[1]), "PATH": ""},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("200 records, ") and "questions" in lines[0]
    assert any(line.startswith("records index rendered from the cards: ") for line in lines)
    assert any(" MB of HTML" in line for line in lines)
