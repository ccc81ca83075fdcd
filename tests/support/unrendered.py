"""Markup that reached a built page as text: an extension not enabled, a template leftover.

`leftovers(html)` reads a page's article (not the theme around it) the way a reader sees it,
code blocks and inline code left out (a page may show markup as an example), and names every
piece of Markdown or template syntax that should have become HTML.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

# At the start of a block: an admonition (`!!!`), a collapsible block (`???`, `???+`), a task
# list item (`[x]`, `[ ]`). Anywhere: attribute lists (`{: .class}`), Jinja (`{{ }}`, `{% %}`,
# `{# #}`) and kbgen's own section markers (`render.fill` replaces them).
_BLOCK_START = re.compile(r"^\s*(?:!!!|\?\?\?\+?|\[[ xX]\]\s)")
_ANYWHERE = re.compile(r"\{:|\{\{|\}\}|\{%|%\}|\{#|#\}|\x00|kbgen:[a-z-]+\x00")
_BLOCKS = {"p", "li", "td", "th", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "summary"}
_CODE = {"pre", "code", "script", "style"}


class _Text(HTMLParser):
    """The text of each block outside code, block by block."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self._open: list[str] = []
        self._code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _CODE:
            self._code += 1
        if tag in _BLOCKS:
            self.blocks.append("")
        self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _CODE:
            self._code = max(0, self._code - 1)
        if tag in _BLOCKS:
            self.blocks.append("")  # what follows a nested block starts a new one
        if tag in self._open:
            while self._open and self._open.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if self._code:
            return
        if not self.blocks:
            self.blocks.append("")
        self.blocks[-1] += data


def leftovers(html: str) -> list[str]:
    """Every block of `html`'s article whose text holds markup that did not render."""
    start = html.find("<article")
    end = html.find("</article>", start)
    parser = _Text()
    parser.feed(html[start:end] if start >= 0 and end > start else html)
    parser.close()
    found = []
    for block in parser.blocks:
        for line in block.splitlines() or [block]:
            if _BLOCK_START.match(line) or _ANYWHERE.search(line):
                found.append(line.strip()[:120])
    return found
