"""MkDocs as the site tests run it: in a subprocess, its render hook running the kbgen under
test (not the one the virtualenv installed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kbgen


def mkdocs(*args: str) -> subprocess.CompletedProcess[str]:
    """`mkdocs ARGS…` with kbgen's source first on the path; never raises on its exit code."""
    program = Path(sys.executable).with_name("mkdocs")
    return subprocess.run(
        [str(program), *args],
        capture_output=True,
        text=True,
        check=False,
        env={
            "NO_MKDOCS_2_WARNING": "1",
            "PATH": str(program.parent),
            "PYTHONPATH": str(Path(kbgen.__file__).parents[1]),
        },
    )
