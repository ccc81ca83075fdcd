"""The one path from text to page (`render.to_page`) against the payload corpus, each payload in
each kind of field and where templates put it, read back by the site's own Markdown parser."""

from __future__ import annotations

import html
import re
import unicodedata
from html.parser import HTMLParser

import pytest
import yaml

from kbgen.site import markup, render
from kbgen.site.render import to_page
from tests.support.hostile import PAYLOAD, PAYLOADS, REPO, problems, to_html

# where templates put a plain value, and the text the reader must then see ({} is the value)
PLACES = {
    "paragraph": ("Before {} after", "Before {} after"),
    "list item": ("- {}", "{}"),
    "heading": ("## {}", "{}"),
    "table cell": ("| a | b |\n|---|---|\n| {} | x |", "a b {} x"),
    "bold": ("**{}**", "{}"),  # (given stripped: emphasis around a space is no emphasis)
    "link text": ("[{}](other.md)", "{}"),
    "admonition": ('!!! note "Title"\n    {}', "Title {}"),
    "quote": ("> {}", "{}"),
}


def _shown(value: str) -> str:
    """What a reader should see of a plain value: its characters, on one line, without control
    characters (line breaks aside), surrogates and non-characters."""
    kept = (
        c
        for c in value
        if c.isspace()
        or (
            not (unicodedata.category(c) in ("Cc", "Cs") or 0xFDD0 <= ord(c) <= 0xFDEF)
            and c not in "\ufffe\uffff"
        )
    )
    return " ".join("".join(kept).split())


class _Text(HTMLParser):
    """The visible text of HTML, without the headings' permalink signs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a" and ("class", "headerlink") in attrs:
            self.skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self.skip:
            self.skip -= 1

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def visible(page_html: str) -> str:
    parser = _Text()
    parser.feed(page_html)
    return " ".join("".join(parser.parts).split())


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("payload", [*PAYLOADS, PAYLOAD], ids=range(len(PAYLOADS) + 1))
def test_a_plain_value_is_shown_as_typed_and_is_nothing_else(payload: str, place: str) -> None:
    markup_, shown = PLACES[place]
    payload = _shown(payload) if place == "bold" else payload
    page_html = to_html(markup_.format(to_page(payload)))
    assert problems(page_html) == []
    assert visible(page_html) == " ".join(shown.format(_shown(payload)).split())
    links = page_html.count("<a ") - page_html.count(' class="headerlink"')
    assert links == markup_.count("](")  # the template's own link, no other


@pytest.mark.parametrize("payload", [*PAYLOADS, PAYLOAD], ids=range(len(PAYLOADS) + 1))
def test_a_value_in_a_templates_html_block_is_shown_as_typed_in_text_and_attribute(
    payload: str,
) -> None:
    """Inside an HTML block of a template's, where Markdown is not read (a sweep's best lines),
    text and attribute values are HTML-escaped: shown as typed, on one line, never markup."""
    value = to_page(payload, "html")
    page_html = to_html(
        f'<ul class="x">\n<li data-x="{value}">At {value}: <strong>{value}</strong></li>\n</ul>'
    )
    assert problems(page_html) == [] and "<a " not in page_html
    shown = " ".join(_shown(payload).split())
    assert visible(page_html) == " ".join(f"At {shown}: {shown}".split())
    (attribute,) = re.findall(r'data-x="([^"]*)"', page_html)
    assert html.unescape(attribute) == markup._one_line(payload)


@pytest.mark.parametrize("payload", [*PAYLOADS, PAYLOAD], ids=range(len(PAYLOADS) + 1))
def test_a_plain_value_inside_a_templates_backticks_stays_inert(payload: str) -> None:
    """An older template may still put a value between backticks of its own."""
    page_html = to_html(f"Commit `{to_page(payload)}` of | a cell `{to_page(payload)}` |")
    assert problems(page_html) == [] and "<a " not in page_html


@pytest.mark.parametrize("payload", [*PAYLOADS, PAYLOAD], ids=range(len(PAYLOADS) + 1))
def test_code_is_shown_as_typed(payload: str) -> None:
    for place in ("Run {} now", "| a | b |\n|---|---|\n| {} | x |", "- {}"):
        page_html = to_html(place.format(to_page(payload, "code")))
        assert problems(page_html) == [] and "<a " not in page_html
        codes = re.findall(r"<code>(.*?)</code>", page_html, re.S)
        assert [" ".join(html.unescape(c).split()) for c in codes] == [_shown(payload)]


@pytest.mark.parametrize("payload", [*PAYLOADS, PAYLOAD], ids=range(len(PAYLOADS) + 1))
def test_markdown_keeps_no_unsafe_link_in_any_place(payload: str) -> None:
    text = to_page(payload, "markdown")
    for place in ("## Context\n\n{}\n\n## Next", "> {}", "- {}", '??? note "x"\n    {}'):
        page_html = to_html(place.format(text))
        assert problems(page_html) == [], text


@pytest.mark.parametrize("base", ["../records/", "javascript:", "java\tscript:/", "//evil.org/"])
@pytest.mark.parametrize("payload", [*PAYLOADS, PAYLOAD], ids=range(len(PAYLOADS) + 1))
def test_markdown_shown_on_another_page_keeps_no_unsafe_link(payload: str, base: str) -> None:
    """A record's Markdown on a plan's page, inside a list item, its links rebased (`base` is a
    template's: it may be anything)."""
    text = render.markdown(payload, indent=4, base=base)
    page_html = to_html(f"- [x] A task\n\n    **Decision:** {text}\n\n- [ ] Another")
    assert problems(page_html) == [], text


def test_markdown_keeps_safe_links_live_and_its_formatting() -> None:
    text = (
        "[record](other-record.md#verdict) and [plan](../plans/p.md), "
        "[site](https://ok.example/a?b=1&c=2), <https://ok.example>, [mail](mailto:a@b.example), "
        "[here](#section); **bold**, *em*, `co|de <x>`\n\n- [x] done\n- [ ] open\n\n"
        "| a | b |\n|:--|--:|\n| 1 | 2 |\n\n> quoted\n\n## Sub-heading\n\n1. one\n2. two"
    )
    page_html = to_html(to_page(text, "markdown"))
    hrefs = re.findall(r'<a href="([^"]*)"', page_html)
    assert [html.unescape(h) for h in hrefs if not h.startswith("#sub")] == [
        "other-record.md#verdict",
        "../plans/p.md",
        "https://ok.example/a?b=1&c=2",
        "https://ok.example",
        "mailto:a@b.example",
        "#section",
    ]
    for made in ("<strong>bold</strong>", "<em>em</em>", "<code>co|de &lt;x&gt;</code>"):
        assert made in page_html
    assert page_html.count('type="checkbox"') == 2 and "<table>" in page_html
    assert "<blockquote>" in page_html and "<h2" in page_html and "<ol>" in page_html


@pytest.mark.parametrize(
    ("url", "written"),
    [
        ("https://ok.example/a b", "https://ok.example/a%20b"),
        ("other.md#x", "other.md#x"),
        ("?a=1&b=2", "?a=1&amp;b=2"),
        ("&#106;avascript:x", "&amp;#106;avascript:x"),  # stays text: no entity to decode
        ("java\tscript:alert(1)", None),
        ("\x00 javascript:alert(1)", None),
        ("JAVASCRIPT:alert(1)", None),
        ("data:text/html,x", None),
        ("vbscript:x", None),
        ("file:///etc/passwd", None),
        ("", None),
    ],
)
def test_safe_url(url: str, written: str | None) -> None:
    assert markup.safe_url(url) == written


@pytest.mark.parametrize("payload", [*PAYLOADS, PAYLOAD], ids=range(len(PAYLOADS) + 1))
def test_front_matter_is_a_yaml_string_of_the_escaped_text(payload: str) -> None:
    value = yaml.safe_load(f"title: {to_page(payload, 'front_matter')}")["title"]
    assert value == html.escape(_shown(payload)) and "<" not in value


def test_a_value_already_encoded_passes_as_is_and_none_is_empty() -> None:
    once = to_page("[x](javascript:alert(1))")
    assert to_page(once) is once and to_page(once, "markdown") is once
    assert to_page(None) == "" and to_page(3.5) == "3.5"


TYPICAL = [
    "A paragraph with **bold**, *em*, `code`, [a record](other.md#verdict) and\na soft break.",
    "- one\n- two\n    - nested\n    - nested too\n- three",
    "1. first\n\n2. second\n\n    with a paragraph\n\n3. third",
    "- [x] done\n- [ ] open",
    "> A quote\n> on two lines.\n>\n> And a second paragraph.",
    "| Class | Effect |\n|:--|--:|\n| coding | -26% |\n| math | +3% |",
    '!!! warning "Read this"\n    A body with [a link](https://ok.example).\n\n    Two paragraphs.',
    "```python\nprint('[x](y)', 1 < 2 & 3)\n```",
    "## A heading\n\nText under it.\n\n---\n\nAfter a rule.",
    "Text with a <b>tag</b> & an &amp; entity, C# and snake_case_name.",
]


def _field_texts() -> list[str]:
    texts = []
    for path in sorted((REPO / "records").rglob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for key in ("context", "decision", "consequences"):
            texts.append(doc.get(key) or "")
        texts.append((doc.get("verdict") or {}).get("rationale") or "")
        texts.append((doc.get("hypothesis") or {}).get("statement") or "")
    return [t for t in texts if t]


@pytest.mark.parametrize("text", TYPICAL + _field_texts())
def test_markdown_rebuilt_by_kbgen_renders_as_the_authors(text: str) -> None:
    """What the author wrote and what kbgen writes back make the same HTML on the site (raw
    HTML aside: the field's is shown as text), so rebuilding costs a field nothing."""
    authors = to_html(text.replace("<b>", "&lt;b&gt;").replace("</b>", "&lt;/b&gt;"))
    rebuilt = to_html(to_page(text, "markdown"))

    def normal(page_html: str) -> str:
        page_html = re.sub(r'<div class="highlight"><pre><span></span>', "<pre>", page_html)
        page_html = re.sub(r"</?span[^>]*>|</div>(?=\s*$)", "", page_html)
        page_html = re.sub(r"<code[^>]*>", "<code>", page_html)
        return re.sub(r"\s+</code>", "</code>", " ".join(html.unescape(page_html).split()))

    assert normal(rebuilt) == normal(authors)
