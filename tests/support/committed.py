"""The repository as committed, for tests about the example knowledge base.

`make demo` adds a record to records/ and re-renders docs/, and a developer's uncommitted work
changes them too; a test whose assertions are about the example's content reads HEAD instead.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def committed(dest: Path, *paths: str) -> Path:
    """The files of HEAD under `paths` (repository-relative), written below `dest`."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", "HEAD", "--", *paths],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest
