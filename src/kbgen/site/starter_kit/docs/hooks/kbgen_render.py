"""MkDocs hook: render the knowledge base into docs/ before every build and `mkdocs serve` reload.

A convenience for `mkdocs serve`'s live reload only: `make site` and the Pages workflow run
`kbgen render` before building, and Zensical ignores hooks, so nothing the site needs lives here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbgen.site.build import render_site


def on_pre_build(config: Any, **kwargs: Any) -> None:
    docs = Path(config["docs_dir"])
    render_site(docs.parent / "records", docs)
