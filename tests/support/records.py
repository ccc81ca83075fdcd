"""A record read back from disk in the tests, typed as a record."""

from __future__ import annotations

from pathlib import Path

from kbgen.kb.documents import load_file
from kbgen.kb.models import Record


def load_record(path: Path) -> Record:
    """The record at `path`, read as kbgen reads one (validated, its id the file's name)."""
    doc = load_file(path)
    assert isinstance(doc, Record), f"{path} is a plan, not a record"
    return doc
