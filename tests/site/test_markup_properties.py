"""Property tests of the one path from text to page: whatever the text, the site's own Markdown
parser finds nothing live in what `to_page` makes of it, and plain text reads as typed."""

from __future__ import annotations

import datetime as dt
import html
import re

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kbgen.kb.cards import Card
from kbgen.kb.models import Plan, Record
from kbgen.site import markup, render
from kbgen.site.render import to_page
from tests.site.test_markup import PLACES, _shown, visible
from tests.support.hostile import hostile_plan, hostile_record, problems, scheme, to_html
from tests.support.properties import examples

# pieces an attacker would combine: Markdown and HTML syntax, schemes and their disguises
PIECES = [
    *"[]()<>!&#;:\\`*_{}|-+=~.\"' x1é",
    "\n", "\n\n", "\t", "    ", "\x00", "\x02", "\x03", "\u2028", "\r",
    "javascript:", "JaVaScRiPt:", "java\tscript:", "data:", "vbscript:", "alert(1)",
    "&#106;", "&colon;", "&#x3a;", "&lt;", "&amp;", "onerror=", "onclick=", "<img src=x ",
    '<a href="', "<script>", "<svg onload=", "[r]: ", "[r]", "](", "![", "{: ", "!!! note ",
    "```", "~~~", "1. ", "- ", "> ", "<!--", "-->", "https://ok.example", "x.md",
]  # fmt: skip
TEXTS = st.one_of(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), st.text(max_size=60))
SETTINGS = settings(derandomize=True, max_examples=examples(250), deadline=None)


@SETTINGS
@given(TEXTS)
def test_plain_text_reads_as_typed_wherever_it_is_put(text: str) -> None:
    for place, (markup_, shown) in PLACES.items():
        value = _shown(text) if place == "bold" else text
        page_html = to_html(markup_.format(to_page(value)))
        assert problems(page_html) == []
        assert visible(page_html) == " ".join(shown.format(_shown(value)).split())


@SETTINGS
@given(TEXTS)
def test_code_reads_as_typed(text: str) -> None:
    page_html = to_html(f"| a | b |\n|---|---|\n| {to_page(text, 'code')} | x |")
    assert problems(page_html) == []
    codes = re.findall(r"<code>(.*?)</code>", page_html, re.S)
    assert [" ".join(html.unescape(c).split()) for c in codes] == (
        [_shown(text)] if _shown(text) else []
    )


@SETTINGS
@given(TEXTS)
def test_markdown_leaves_nothing_live(text: str) -> None:
    once = to_page(text, "markdown")
    for place in ("{}", "> {}", "- {}", '!!! note "x"\n    {}'):
        assert problems(to_html(place.format(once))) == []


@SETTINGS
@given(TEXTS)
def test_a_url_kept_is_one_a_browser_reads_as_safe(url: str) -> None:
    written = markup.safe_url(url)
    if written is None:
        return
    hrefs = re.findall(r'<a href="([^"]*)"', to_html(f"[link]({written})"))
    assert len(hrefs) == 1 and scheme(html.unescape(hrefs[0])) in (None, "http", "https", "mailto")


@settings(derandomize=True, max_examples=examples(120), deadline=None)
@given(TEXTS)
def test_pages_of_a_record_and_a_plan_made_of_it_leave_nothing_live(text: str) -> None:
    record = Record.model_validate(hostile_record("r", text, ["p#t0"]))
    plan = Plan.model_validate(hostile_plan("p", [text or "x"]))
    env = render.environment(None)
    pages = render.record_pages(env, record, "records/r.yaml", render.task_texts([plan]))
    pages |= render.site_pages(env, {"p": plan}, {"p": "records/plans/p.yaml"}, [Card.of(record)])
    for name, page in pages.items():
        assert problems(to_html(page)) == [], name
        if page.startswith("---\n"):
            meta = yaml.safe_load(page.split("\n---\n", 1)[0][4:])
            title = meta.get("title", "")  # the records index has none: its heading is fixed
            assert "<" not in title and isinstance(title, str)
    assert record.created == dt.date(2026, 11, 1)


PROSE = st.lists(
    st.sampled_from([*"abc XYZ019é—.,:;()/%+'\"=?@-!~^$", "\n", "\n\n", "1. ", "  ", "\n\n\n"]),
    max_size=40,
).map("".join)


@SETTINGS
@given(PROSE)
def test_prose_is_left_as_it_is_exactly_as_its_parse_would_give_it_back(text: str) -> None:
    """The shortcut for prose (no Markdown in it) gives what the full path gives."""
    assert markup.inert(text) == markup._escaped(markup._one_line(text), start=True)
    rebuilt = markup._rebuilt(text) if text.strip() else ""
    assert markup.markdown(text) == rebuilt
