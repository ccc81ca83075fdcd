"""Fixtures of the site tests: a knowledge base rendered the way `kbgen render` renders it, and
the built site served to a headless Chromium."""

from __future__ import annotations

import functools
import http.server
import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kbgen.site import build
from tests.support import chromium
from tests.support.site import mkdocs as mkdocs  # the site tests import it from here

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


def serve(site: Path, port: int = 0) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (on `port`; 0: any free one), its base URL
    yielded."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))

    class Quiet(http.server.ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            pass  # the browser closing a connection early is not a test failure

    server = Quiet(("127.0.0.1", port), handler)
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")  # not longer: Playwright's event loop would outlive the module
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    executable = chromium.find()
    if executable is None:
        pytest.fail(chromium.MISSING, pytrace=False)  # an error, never a skip
    with sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=executable,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield launched
        launched.close()
