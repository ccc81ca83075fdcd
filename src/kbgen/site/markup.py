"""Text made harmless for a Markdown page: `to_page` and its encoders, one per kind.

The only module that imports Python-Markdown and nh3. What each kind does, and why here rather
than on the built site: docs/design.md, "Text made harmless".
"""

from __future__ import annotations

import functools
import html
import posixpath
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, Literal

import markdown as python_markdown
import nh3

SCHEMES = frozenset({"http", "https", "mailto"})  # besides links within the site (no scheme)

_BREAK = re.compile("\r\n?|[\n\x0b\x0c\x1c-\x1f\x85\u2028\u2029]")
# control characters (Python-Markdown's placeholders \x02 \x03 among them), lone surrogates and
# non-characters: nothing a page needs, and what YAML front matter refuses
_DROP = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]")
_SPACES = re.compile(r"[ \t]+")
# `_` is left alone only between two letters or digits, where it cannot emphasise
_ESCAPE = re.compile(r"[\\`*\[\]{}|<>&]|(?<![^\W_])_|_(?![^\W_])")
# `]` as a reference: a reference definition (`[id]: url`) is found before escapes are read
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;", "]": "&#93;", "=": "&#61;", "~": "&#126;"}
_ORDERED = re.compile(r"\d+(?=[.)](?: |$))")  # `1. `: an ordered list item
_RULE = re.compile(r"[-=][-= ]*$")  # a setext underline or a horizontal rule
_HASH_END = re.compile(r"(?<!\\)((?:\\\\)*)#( *)$")  # a final `#` not escaped
# prose: letters, digits, single spaces and punctuation that no Markdown construct needs, starting
# with a letter, a digit or `(` but not as `1. ` — what `inert` and `markdown` leave as it is
_PROSE = re.compile(
    r"(?!\d+[.)](?: |$))(?:[^\W_]|\()"
    r"(?: ?[^\\`*\[\]{}|<>&_#\s\x00-\x1f\x7f-\x9f\ufdd0-\ufdef\ufffe\uffff\ud800-\udfff])*"
)
_CODE_SPAN_SAFE = re.compile(r"[^`\\|<&]+")  # nothing that ends a span early, in a table too


def _lines(text: str) -> str:
    """`text` without control characters, its line breaks `\n`, runs of spaces one space."""
    text = _SPACES.sub(" ", _DROP.sub("", _BREAK.sub("\n", text)))
    return re.sub(" ?\n ?", "\n", text)


def _one_line(text: str) -> str:
    return _SPACES.sub(" ", _lines(text).replace("\n", " "))


def _escaped(text: str, start: bool = False) -> str:
    """`text` with every character escaped that Markdown could read as markup; with `start`,
    also what would start a block at the start of each of its lines."""
    return "\n".join(_escaped_line(line, start or i > 0) for i, line in enumerate(text.split("\n")))


def _escaped_line(line: str, start: bool) -> str:
    out = _ESCAPE.sub(lambda m: _ENTITIES.get(m[0], "\\" + m[0]), line)
    lead, out = out[: len(out) - len(out.lstrip(" "))], out.lstrip(" ")
    if start and out:
        if ordered := _ORDERED.match(out):
            out = f"{out[: ordered.end()]}\\{out[ordered.end() :]}"
        elif out[0] in "#!" or (out[0] in "-+" and (out[1:2] in ("", " ") or _RULE.match(out))):
            out = "\\" + out
        elif (out[0] == "=" and _RULE.match(out)) or out.startswith("~~~"):
            out = _ENTITIES[out[0]] + out[1:]
    return lead + _closing_hash(out)


def _closing_hash(line: str) -> str:
    """`line` with a final `#` escaped: a heading's closing hashes are dropped."""
    return _HASH_END.sub(r"\1\\#\2", line)


def inert(text: str) -> str:
    """Plain text as Markdown that shows exactly that text, on one line, and nothing else."""
    if _PROSE.fullmatch(text):  # most values: nothing to escape (a shortcut, same result)
        return text
    return _escaped(_one_line(text), start=True)


def code(text: str) -> str:
    """Plain text as inline code."""
    text = _one_line(text).strip()  # as Python-Markdown strips a code span
    if not text:
        return ""
    if _CODE_SPAN_SAFE.fullmatch(text):
        return f"`{text}`"
    return f"<code>{inert(text)}</code>"


def front_matter(text: str) -> str:
    """A YAML double-quoted string of `text`, HTML-escaped: what MkDocs prints as the title."""
    return '"' + html.escape(_one_line(text).strip(" ")).replace("\\", "\\\\") + '"'


def safe_url(url: str | None) -> str | None:
    """`url` as a Markdown link destination, if a browser would read it as http(s), mailto or a
    link within the site; None for any other scheme (javascript:, data:, vbscript:, file:, …).

    Read as the WHATWG URL parser does: leading and trailing controls and spaces stripped, tabs
    and line breaks removed anywhere. Written percent-encoded, `&` as `&amp;`, so that the
    href MkDocs writes decodes to exactly the URL checked.
    """
    seen = re.sub("[\t\n\r]", "", url or "").strip("".join(map(chr, range(33))))
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", seen)
    if not seen or (scheme and scheme[1].lower() not in SCHEMES):
        return None
    return urllib.parse.quote(seen, safe="!#$%&*+,-./:;=?@_~").replace("&", "&amp;")


def markdown(text: str, base: str = "") -> str:
    """The author's Markdown, written back by kbgen from its parse: only text and checked links.

    A relative link or image is rebased onto `base` (`../records/`: the text of a record shown
    on a page in another folder). Falls back to `inert` (all of it shown as text) if
    Python-Markdown cannot parse it (nesting deeper than Python's recursion limit).
    """
    text = _DROP.sub("", _BREAK.sub("\n", text))
    if not text.strip():
        return ""
    paragraphs = re.split(r"\n\n+", text.strip("\n"))
    if all(_PROSE.fullmatch(line) for p in paragraphs for line in p.split("\n")):
        return "\n\n".join(paragraphs)  # paragraphs of prose: what the parse would give back
    return _rebuilt(text, base)


def _rebuilt(text: str, base: str = "") -> str:
    """`text` parsed, cleaned and written back (`markdown`)."""
    try:
        html_text = _cleaner().clean(_parser().reset().convert(text))
        builder = _Tree()
        builder.feed(html_text)
        builder.close()
        if base:
            for node in _descendants(builder.root):
                for name in ("href", "src"):
                    if name in node.attrs:
                        node.attrs[name] = rebased(node.attrs[name], base)
        return "\n\n".join(_blocks(builder.root.children))
    except RecursionError:
        return inert(text)


def rebased(url: str, base: str) -> str:
    """A relative URL as seen from `base`'s folder (`x.md` from `../records/`: `../records/x.md`);
    any other URL as it is. Checked as every URL is, afterwards (`safe_url`)."""
    parts = urllib.parse.urlsplit(re.sub("[\t\n\r]", "", url).strip("".join(map(chr, range(33)))))
    if parts.scheme or parts.netloc or not parts.path or parts.path.startswith("/"):
        return url
    path = posixpath.normpath(posixpath.join(base, parts.path))
    return urllib.parse.urlunsplit(parts._replace(path=path))


@functools.cache
def _parser() -> python_markdown.Markdown:
    """Python-Markdown as MkDocs configures it for kbgen's site (mkdocs.yml), HTML left as text.

    The fields are parsed with the extensions whose syntax a field may use — tables, fences,
    admonitions, attribute lists (whose attributes are then dropped); task lists are kept by
    `_item`, so pymdownx is not needed here.
    """
    md = python_markdown.Markdown(
        extensions=["tables", "fenced_code", "admonition", "attr_list"],
        extension_configs={"tables": {"use_align_attribute": True}},
    )
    md.preprocessors.deregister("html_block")  # raw HTML is text, never markup
    md.inlinePatterns.deregister("html")
    return md


_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "code", "pre", "a",
    "img", "ul", "ol", "li", "blockquote", "table", "thead", "tbody", "tr", "th", "td", "div",
}  # fmt: skip


@functools.cache
def _cleaner() -> nh3.Cleaner:
    return nh3.Cleaner(
        tags=_TAGS,
        attributes={
            "a": {"href"},
            "img": {"src", "alt"},
            "ol": {"start"},
            "th": {"align"},
            "td": {"align"},
            "div": {"class"},
            "p": {"class"},
        },
        url_schemes=set(SCHEMES),
        link_rel=None,
        strip_comments=True,
    )


@dataclass
class _Node:
    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[_Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)


class _Tree(HTMLParser):
    """nh3's output (well-formed HTML) as a tree of `_Node`s, entities decoded."""

    VOID = frozenset({"br", "hr", "img"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = _Node("root")
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = _Node(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].children.append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        if any(node.tag == tag for node in self.stack[1:]):
            while self.stack.pop().tag != tag:
                pass

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


_BLOCK_TAGS = frozenset(
    {"p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "blockquote", "pre", "table", "hr"}
    | {"div"}
)
_TASK = re.compile(r"\[([ xX])\] ")


def _blocks(nodes: list[_Node | str]) -> list[str]:
    """Markdown blocks of `nodes`; a run of inline nodes between blocks is a paragraph."""
    out: list[str] = []
    run: list[_Node | str] = []
    for node in nodes:
        if isinstance(node, _Node) and node.tag in _BLOCK_TAGS:
            out.append(_inline(run))
            out.append(_block(node))
            run = []
        else:
            run.append(node)
    out.append(_inline(run))
    return [block for block in out if block]


def _block(node: _Node) -> str:
    tag = node.tag
    if tag == "p":
        return _inline(node.children)
    if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
        line = _one_line_of(node.children)
        return f"{'#' * int(tag[1])} {_closing_hash(line)}" if line else ""
    if tag == "hr":
        return "---"
    if tag in ("ul", "ol"):
        items = [c for c in node.children if isinstance(c, _Node) and c.tag == "li"]
        bodies = [body for body in map(_item, items) if body]  # an empty item: none
        first = int(node.attrs["start"]) if node.attrs.get("start", "").isdigit() else 1
        markers = [f"{first + i}. " if tag == "ol" else "- " for i in range(len(bodies))]
        loose = any(isinstance(c, _Node) and c.tag == "p" for li in items for c in li.children)
        return ("\n\n" if loose else "\n").join(
            _indented(body, marker) for marker, body in zip(markers, bodies, strict=True)
        )
    if tag == "blockquote":
        inner = "\n\n".join(_blocks(node.children))
        return "\n".join(f"> {line}".rstrip() for line in inner.split("\n")) if inner else ""
    if tag == "pre":
        content = node.text().removesuffix("\n")
        # one line of character references: the same wherever the block lands (a raw HTML
        # block, or inline HTML inside a list), and nothing in it is markup
        encoded = re.sub(r"[^\w ]|_", lambda m: f"&#{ord(m[0])};", content)
        return f"<pre><code>{encoded}</code></pre>" if content else ""
    if tag == "table":
        return _table(node)
    if tag == "div":
        return _admonition(node)
    return ""


def _indented(text: str, first: str) -> str:
    lines = text.split("\n")
    return "\n".join([first + lines[0], *(f"    {line}".rstrip(" ") for line in lines[1:])])


def _item(item: _Node) -> str:
    """A list item's content; `[x] ` at its start kept as a task box (pymdownx.tasklist)."""
    holder = item
    if holder.children and isinstance(holder.children[0], _Node) and holder.children[0].tag == "p":
        holder = holder.children[0]
    box = ""
    if holder.children and isinstance(holder.children[0], str):
        first = holder.children[0].lstrip()
        if task := _TASK.match(first):
            box = f"[{task[1]}] "
            holder.children[0] = first[task.end() :]
    nested = [c for c in item.children if isinstance(c, _Node) and c.tag in _BLOCK_TAGS]
    tight = all(c.tag in ("ul", "ol") for c in nested)
    body = ("\n" if tight else "\n\n").join(_blocks(item.children))
    return box + body if body or box else ""


def _table(node: _Node) -> str:
    rows = [
        [c for c in row.children if isinstance(c, _Node) and c.tag in ("th", "td")]
        for row in _descendants(node)
        if row.tag == "tr"
    ]
    if not rows or not rows[0]:
        return ""
    width = len(rows[0])
    align = {"left": ":--", "right": "--:", "center": ":-:"}
    texts = [[_one_line_of(cell.children) or " " for cell in row] for row in rows]
    rule = [align.get(cell.attrs.get("align", ""), "---") for cell in rows[0]]
    lines = [texts[0], rule, *texts[1:]]
    return "\n".join("| " + " | ".join((line + [" "] * width)[:width]) + " |" for line in lines)


def _admonition(node: _Node) -> str:
    classes = node.attrs.get("class", "").split()
    children = node.children
    if "admonition" not in classes:
        return "\n\n".join(_blocks(children))
    kind = next((c for c in classes if c != "admonition" and re.fullmatch(r"[\w-]+", c)), "note")
    title = ""
    for i, child in enumerate(children):
        if isinstance(child, _Node) and "admonition-title" in child.attrs.get("class", ""):
            title, children = _one_line_of(child.children), children[:i] + children[i + 1 :]
            break
    body = "\n\n".join(_blocks(children))
    head = f'!!! {kind} "{title}"'
    return (
        head + "".join(f"\n    {line}".rstrip(" ") for line in body.split("\n")) if body else head
    )


def _descendants(node: _Node) -> list[_Node]:
    found = []
    for child in node.children:
        if isinstance(child, _Node):
            found += [child, *_descendants(child)]
    return found


def _inline(nodes: list[_Node | str], start: bool = True, breaks: bool = True) -> str:
    """Inline nodes as Markdown; `start`: they begin a block; `breaks`: line breaks kept."""
    out = ""
    for node in nodes:
        at_start = (start and not out.strip()) or out.endswith("\n")
        if isinstance(node, str):
            text = _lines(node) if breaks else _one_line(node)
            out += _escaped(text.lstrip(" \n") if at_start else text, at_start)
            continue
        inner = _inline(node.children, start=False, breaks=False)
        if node.tag == "br":
            out += "<br>"
        elif node.tag == "code":
            out += code(node.text())
        elif node.tag in ("em", "strong"):
            core, mark = inner.strip(" "), "*" if node.tag == "em" else "**"
            lead = " " if inner.startswith(" ") else ""  # outside the marks, or no emphasis
            trail = " " if inner.endswith(" ") else ""
            out += f"{lead}{mark}{core}{mark}{trail}" if core else inner
        elif node.tag == "a":
            href = safe_url(node.attrs.get("href"))
            out += f"[{inner}]({href})" if href and inner.strip() else inner
        elif node.tag == "img":
            src, alt = (
                safe_url(node.attrs.get("src")),
                _escaped(_one_line(node.attrs.get("alt", ""))),
            )
            out += f"![{alt}]({src})" if src else alt
        else:
            out += inner
    return out.strip(" \n") if start else out


def _one_line_of(nodes: list[_Node | str]) -> str:
    """Inline nodes as one line (a heading, a table cell, an admonition's title)."""
    return _inline(nodes, breaks=False)


class Markdown(str):
    """Text already encoded for a Markdown page by `to_page`: printed as is."""


def html_text(text: str) -> str:
    """Plain text for inside an HTML block a template writes (where Markdown is not read): on
    one line, HTML-escaped, quotes too, so that it is safe in an attribute's value as well."""
    return html.escape(_one_line(text), quote=True)


Kind = Literal["text", "markdown", "code", "front_matter", "html"]
_ENCODERS: dict[str, Callable[[str], str]] = {
    "text": inert,
    "code": code,
    "front_matter": front_matter,
    "html": html_text,
}


def to_page(value: Any, kind: Kind = "text", base: str = "") -> Markdown:
    """The one way a value reaches a page (Jinja's `finalize`, and the filters of each kind).

    `text`: shown as exactly that text; `markdown`: the author's Markdown with only safe links
    (its relative links rebased onto `base`, where the page is not in the record's folder);
    `code`: inline code; `front_matter`: a YAML string; `html`: text inside an HTML block of a
    template's (`html_text`). None is empty; a `Markdown` value is already encoded.
    """
    if isinstance(value, Markdown):
        return value
    text = "" if value is None else str(value)
    if kind == "markdown":
        return Markdown(markdown(text, base))
    return Markdown(_ENCODERS[kind](text))
