"""The record stage's fixture: a records folder holding the plan the test runs resolve."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PLAN


@pytest.fixture
def records(tmp_path: Path) -> Path:
    folder = tmp_path / "records"
    (folder / "plans").mkdir(parents=True)
    (folder / "plans" / "next-steps.yaml").write_text(PLAN)
    return folder
