"""Running a bench/perf script in its quick mode from a test: its figures, as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]


def quick(script: str, tmp_path: Path, *args: str) -> Any:
    """`bench/perf/<script> --quick --json FILE [ARGS]` with this checkout's kbgen; the file's
    figures."""
    out = tmp_path / "figures.json"
    src = str(ROOT / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "perf" / script),
            "--quick",
            "--json",
            str(out),
            *args,
        ],
        check=True,
        capture_output=True,
        timeout=600,
        env=env,
    )
    return json.loads(out.read_text())
