"""Fixtures of the site tests: a knowledge base rendered the way `kbgen render` renders it."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from kbgen.site import build

Site = Callable[..., dict[str, str]]


@pytest.fixture
def site(tmp_path: Path) -> Site:
    """`site(records, templates=None)`: every page `build.render_site` writes for `records`
    into a fresh docs/ (no caches), by path under docs/."""
    counter = itertools.count()

    def pages(records: Path, templates: Path | None = None) -> dict[str, str]:
        docs = tmp_path / f"site-{next(counter)}"
        build.render_site(records, docs, templates, cache=None)
        return read_pages(docs)

    return pages


def read_pages(docs: Path) -> dict[str, str]:
    """Every file under `docs`, by relative path, as text (a torn UTF-8 character shows as
    U+FFFD, so a torn file never matches a whole one)."""
    return {
        path.relative_to(docs).as_posix(): path.read_text(errors="replace")
        for path in sorted(docs.rglob("*"))
        if path.is_file()
    }
