"""The built site: `mkdocs build --strict`, then a real browser (headless Chromium) on it."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from tests.conftest import REPO
from tests.site.conftest import mkdocs, serve
from tests.support.figures import as_recorded
from tests.support.free_port import free_port

ARTIFACTS = REPO / "test-artifacts"
HOSTILE = """\
schema_version: 1
id: 2026-11-29-hostile
title: 'Hostile <script>window.__pwned = "title"</script> record'
status: planned
created: 2026-11-29
context: |
  <img src=x onerror="window.__pwned = 'img'"> and <script>window.__pwned = 'context'</script>
  and [click me](javascript:window.__pwned='link')
tags: [security]
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example knowledge base plus a hostile record, built with --strict."""
    root = tmp_path_factory.mktemp("kb")
    for name in ("docs", "records"):
        shutil.copytree(REPO / name, root / name)
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    (root / "records" / "2026-11-29-hostile.yaml").write_text(HOSTILE)
    built = mkdocs("build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(root / "site"))
    assert built.returncode == 0, built.stderr
    return root / "site"


def test_the_repository_site_builds_strict(tmp_path: Path) -> None:
    built = mkdocs("build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(tmp_path))
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "plans" / "next-steps-eagle" / "index.html").exists()


def test_hostile_text_reaches_the_html_escaped(site: Path) -> None:
    page = (site / "records" / "2026-11-29-hostile" / "index.html").read_text()
    assert "<script>window.__pwned" not in page and "<img src=x" not in page
    assert "&lt;script&gt;window.__pwned" in page and "javascript:" not in page


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    yield from serve(site)


def _page(browser: object, url: str) -> object:
    page = browser.new_page(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    page.goto(url, wait_until="networkidle")
    return page


def test_plan_page_shows_ticked_and_open_tasks(browser: object, served: str) -> None:
    page = _page(browser, f"{served}/plans/next-steps-eagle/")
    boxes = page.locator("li.task-list-item input[type=checkbox]")  # type: ignore[attr-defined]
    checked = [boxes.nth(i).is_checked() for i in range(boxes.count())]
    assert checked == [True, True, False, False, False]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "plan-next-steps-eagle.png"), full_page=True)  # type: ignore[attr-defined]


def _records(site: Path) -> dict[str, dict[str, Any]]:
    """The YAML of the records the site was built from, by id."""
    data = (yaml.safe_load(p.read_text()) for p in (site.parent / "records").glob("*.yaml"))
    return {d["id"]: d for d in data}


def _record_of(item: object) -> str:
    """The id of the record the first link in a page element leads to."""
    href = item.locator("a").first.get_attribute("href")  # type: ignore[attr-defined]
    return str(href).rstrip("/").rsplit("/", 1)[-1]


def test_the_plan_page_shows_each_ticked_task_s_figures(
    browser: object, served: str, site: Path
) -> None:
    """The figures under each ticked task, as the reader sees them, are its record's."""
    records = _records(site)
    page = _page(browser, f"{served}/plans/next-steps-eagle/")
    items = page.locator("li.task-list-item")  # type: ignore[attr-defined]
    ticked = [
        items.nth(i) for i in range(items.count()) if items.nth(i).locator("input").is_checked()
    ]
    assert ticked
    for item in ticked:
        record = records[_record_of(item)]
        paragraphs = item.locator("p").all_inner_texts()
        assert paragraphs[0].rstrip().endswith(record["verdict"]["outcome"])
        metric = record["hypothesis"]["primary_metric"]
        (figures,) = [p for p in paragraphs if p.startswith(f"{metric}: ")]
        as_recorded(figures, record)
        assert item.locator("p", has_text=figures).first.is_visible()


def test_the_records_index_shows_each_record_s_effect(
    browser: object, served: str, site: Path
) -> None:
    records = _records(site)
    page = _page(browser, f"{served}/records/")
    tables = page.locator("article table")  # type: ignore[attr-defined]
    shown = {}
    for t in range(tables.count()):
        table = tables.nth(t)
        header = table.locator("th").all_inner_texts()
        column = header.index("Effect")
        rows = table.locator("tbody tr")
        for r in range(rows.count()):
            row = rows.nth(r)
            shown[_record_of(row)] = row.locator("td").nth(column).inner_text().strip()
    assert shown.keys() == records.keys()
    for rid, cell in shown.items():
        per_class = ((records[rid].get("verdict") or {}).get("per_class") or {}).values()
        effects = [v["effect"] for v in per_class]
        if not effects:
            assert cell == "–"
            continue
        low, high = f"{min(effects):+.1%}", f"{max(effects):+.1%}"
        change = low if low == high else f"{low} … {high}"
        assert cell == f"{change} {records[rid]['hypothesis']['primary_metric']}"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "records-index.png"), full_page=True)  # type: ignore[attr-defined]


def _visible(page: Any, column: str) -> list[str]:
    """The cells of `column` in the records index's rows that are shown, top to bottom."""
    heads = page.locator("article table thead th").all_inner_texts()
    n = [h.strip() for h in heads].index(column) + 1
    return [
        text.strip()
        for text in page.locator(
            f"article table tbody tr:not([hidden]) td:nth-child({n})"
        ).all_inner_texts()
    ]


def _first_change(cell: str) -> float | None:
    found = re.search(r"[-+]\d+(?:\.\d+)?(?=%)", cell)
    return float(found[0]) if found else None


def _filter(page: Any, query: str) -> str:
    """The count the index shows once `query` is typed into its filter box and applied."""
    page.locator("[data-kbgen-records] input").fill(query)
    page.wait_for_function(
        "(q) => document.querySelector('[data-kbgen-records]').dataset.kbgenFiltered === q",
        arg=query,
    )
    return str(page.locator("[data-kbgen-records] output").inner_text())


def test_the_records_index_sorts_and_filters_in_the_browser(
    browser: object, served: str, site: Path
) -> None:
    """One table of every record, newest first; a heading's click sorts by its column (again:
    the other way), and the box filters by words, "phrases" and column:word."""
    records = _records(site)
    page: Any = _page(browser, f"{served}/records/")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    assert page.locator("article table").count() == 1
    dates = _visible(page, "Date")
    assert len(dates) == len(records) and dates == sorted(dates, reverse=True)
    heading = page.locator("article th", has_text="Effect")
    heading.locator("button").click()
    assert heading.get_attribute("aria-sort") == "ascending"
    changes = [_first_change(cell) for cell in _visible(page, "Effect")]
    numbers = [c for c in changes if c is not None]
    assert numbers == sorted(numbers) and changes[: len(numbers)] == numbers  # none: last
    heading.locator("button").click()
    changes = [_first_change(cell) for cell in _visible(page, "Effect")]
    numbers = [c for c in changes if c is not None]
    assert numbers == sorted(numbers, reverse=True) and changes[: len(numbers)] == numbers
    page.locator("article th button", has_text="Date").click()
    assert _visible(page, "Date") == dates

    # the verdict column says "refuted", or an inconclusive record's class it names does
    # (`inconclusive (coding: inconclusive, math: refuted)`)
    refuted = {
        rid
        for rid, r in records.items()
        if (verdict := r.get("verdict") or {}).get("outcome") == "refuted"
        or (
            len({c["outcome"] for c in (verdict.get("per_class") or {}).values()}) > 1
            and any(c["outcome"] == "refuted" for c in verdict["per_class"].values())
        )
    }
    assert (
        refuted and _filter(page, "verdict:refuted") == f"{len(refuted)} of {len(records)} records"
    )
    shown = page.locator("article table tbody tr:not([hidden])")
    assert {_record_of(shown.nth(i)) for i in range(shown.count())} == refuted
    assert _filter(page, 'h200 "concurrency 32"') == f"2 of {len(records)} records"
    assert set(_visible(page, "Hardware")) == {"1 × NVIDIA H200"}
    assert all("concurrency 32" in q for q in _visible(page, "Question"))
    assert _filter(page, "<script>") == f"1 of {len(records)} records"  # the hostile title, as text
    assert _filter(page, "no record says this") == f"0 of {len(records)} records"
    assert _filter(page, "") == f"{len(records)} of {len(records)} records"
    assert page.evaluate("() => window.__pwned === undefined") and errors == []
    page.screenshot(path=str(ARTIFACTS / "records-index-sorted.png"), full_page=True)


def test_the_records_index_is_complete_without_javascript(
    browser: object, served: str, site: Path
) -> None:
    context: Any = cast(Any, browser).new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{served}/records/")
    assert page.locator("[data-kbgen-records] input").count() == 0
    rows = page.locator("article table tbody tr")
    assert rows.count() == len(_records(site))
    dates = page.locator("article table tbody td:first-child").all_inner_texts()
    assert dates == sorted(dates, reverse=True)
    context.close()


@pytest.fixture(scope="module")
def instant(site: Path) -> Iterator[str]:
    """The same site built with Material's instant navigation (pages swapped, not loaded), its
    records index showing 3 rows at a time."""
    root = site.parent
    shutil.copytree(root / "docs", root / "docs-instant")
    index = root / "docs-instant" / "records" / "index.md"
    marker = '<div class="kbgen-records" data-kbgen-records></div>'
    assert marker in index.read_text()
    index.write_text(index.read_text().replace(marker, marker.replace("records>", 'records="3">')))
    config = (root / "mkdocs.yml").read_text()
    unset, hooks = 'site_url: !ENV [KBGEN_SITE_URL, ""]', "hooks:\n  - docs/hooks/kbgen_render.py\n"
    assert "  features:\n" in config and unset in config and hooks in config
    config = config.replace("  features:\n", "  features:\n    - navigation.instant\n", 1)
    # Material swaps only the pages its sitemap lists, at the site's address (its port too)
    port = free_port()
    config = config.replace(unset, f"site_url: http://127.0.0.1:{port}/")
    config = config.replace(hooks, "").replace("docs_dir: docs\n", "docs_dir: docs-instant\n")
    (root / "mkdocs-instant.yml").write_text(config)
    built = mkdocs(
        "build", "--strict", "-f", str(root / "mkdocs-instant.yml"), "-d", str(root / "instant")
    )
    assert built.returncode == 0, built.stderr
    yield from serve(root / "instant", port)


def test_the_records_index_after_instant_navigation_shows_a_page_at_a_time(
    browser: object, instant: str, site: Path
) -> None:
    """Reached through instant navigation, the table is set up once per visit (its script
    follows Material's `document$`), and shows as many rows at a time as the page says."""
    n = len(_records(site))
    page: Any = cast(Any, browser).new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{instant}/", wait_until="networkidle")  # wide enough for the navigation's sidebar
    page.evaluate("() => { window.__loaded_once = true; }")  # gone if a page were loaded
    page.locator('nav.md-nav--primary a[href$="/records/"]').first.click()
    page.locator("[data-kbgen-records] input").wait_for(timeout=15_000)
    page.locator('nav.md-nav--primary a[href$="/plans/"]').first.click()
    page.wait_for_url("**/plans/")
    page.go_back()
    page.locator("[data-kbgen-records] input").wait_for(timeout=15_000)
    assert page.evaluate("() => window.__loaded_once") is True
    assert page.locator("[data-kbgen-records] input").count() == 1
    assert page.locator("article th button").count() == 8

    more = page.locator("article button", has_text="more")
    assert _filter(page, "") == f"{n} of {n} records, the first 3 shown"
    for shown in range(3, n, 3):
        assert len(_visible(page, "Date")) == shown
        assert more.inner_text() == f"Show {min(3, n - shown)} more"
        more.click()
    assert len(_visible(page, "Date")) == n and more.is_hidden()
    dates = _visible(page, "Date")
    assert dates == sorted(dates, reverse=True)
    assert _filter(page, "kimi") == f"1 of {n} records" and more.is_hidden()
    # every record but the hostile one and a step of work that names no vLLM (no engine column)
    apart = [r for r in _records(site).values() if "step" in r and "vllm" not in r["title"].lower()]
    assert _filter(page, "vllm") == f"{n - 1 - len(apart)} of {n} records, the first 3 shown"


def test_a_record_page_s_top_box_shows_each_class_s_effect_and_caveats(
    browser: object, served: str, site: Path
) -> None:
    """The box at the top of every judged record's page, as the reader sees it, above the first
    section: each class of the verdict with its outcome, effect and interval as the record
    stores them, and every caveat the record states."""
    records = {rid: r for rid, r in _records(site).items() if r.get("verdict")}
    assert len(records) >= 2
    page: Any = cast(Any, browser).new_page(viewport={"width": 1200, "height": 900})
    for rid, record in sorted(records.items()):
        page.goto(f"{served}/records/{rid}/", wait_until="load")
        box = page.locator("article .admonition").first
        assert box.is_visible()
        assert box.bounding_box()["y"] < page.locator("article h2").first.bounding_box()["y"]
        if record["verdict"].get("cells"):  # a sweep's: its grid (test_verdict_box.py)
            _the_grid_box_shows_each_class_and_caveat(box, record["verdict"], rid)
            continue
        rows = box.locator("tbody tr")
        shown = {}
        for i in range(rows.count()):
            cls, *cells = (c.strip() for c in rows.nth(i).locator("td").all_inner_texts())
            shown[cls] = cells
        verdict = record["verdict"]
        assert list(shown) == list(verdict["per_class"]), rid
        for cls, v in verdict["per_class"].items():
            low, high = v.get("ci_low"), v.get("ci_high")
            interval = "none" if low is None or high is None else f"{low:+.1%} … {high:+.1%}"
            assert shown[cls] == [v["outcome"], f"{v['effect']:+.1%}", interval], (rid, cls)
        text = box.inner_text()
        for caveat in verdict.get("caveats", []):
            cls, _, rest = caveat.partition(": ")
            assert (rest if cls in verdict["per_class"] else caveat) in text, (rid, caveat)
    page.goto(f"{served}/records/2026-12-01-ngram-vs-baseline/", wait_until="load")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("article .admonition").first.screenshot(path=str(ARTIFACTS / "verdict-box.png"))
    page.close()


def _the_grid_box_shows_each_class_and_caveat(box: Any, verdict: dict[str, Any], rid: str) -> None:
    """A sweep's box as the reader sees it: the judged variant's cell of each class, its
    outcome and effect shown, its interval on hover; every caveat once its kind is opened."""
    judged = box.locator("td.kbgen-judged")
    assert judged.count() == len(verdict["per_class"])
    for i, (cls, v) in enumerate(verdict["per_class"].items()):
        cell = judged.nth(i)
        assert (cell.get_attribute("data-class"), cell.get_attribute("data-outcome")) == (
            cls,
            v["outcome"],
        )
        assert cell.inner_text().strip() == f"{v['effect']:+.0%}", (rid, cls)
        low, high = v.get("ci_low"), v.get("ci_high")
        interval = "" if low is None or high is None else f" [{low:+.1%} … {high:+.1%}]"
        assert str(cell.get_attribute("title")).endswith(f"{v['effect']:+.1%}{interval}")
    summaries = box.locator("details summary")
    for i in range(summaries.count()):
        summaries.nth(i).click()
    text = box.inner_text()
    for caveat in verdict.get("caveats", []):
        cls, _, rest = caveat.partition(": ")
        assert (rest if cls in verdict["per_class"] else caveat) in text, (rid, caveat)


def test_a_chart_is_visible(browser: object, served: str) -> None:
    page = _page(browser, f"{served}/records/2026-11-29-ngram-spec-decode-kimi-k2-5/")
    chart = page.locator("figure.kbgen-figure svg.kbgen-chart").first  # type: ignore[attr-defined]
    chart.scroll_into_view_if_needed()
    assert chart.is_visible()
    assert chart.locator("rect").count() >= 4  # bars and legend swatches drawn
    box = chart.bounding_box()
    assert box is not None and box["width"] > 200 and box["height"] > 100
    page.screenshot(path=str(ARTIFACTS / "record-kimi.png"), full_page=True)  # type: ignore[attr-defined]


def test_search_finds_a_record(browser: object, served: str) -> None:
    page = _page(browser, f"{served}/")
    page.locator(".md-search__input").first.click()  # type: ignore[attr-defined]
    page.keyboard.type("AllReduce", delay=30)  # type: ignore[attr-defined]
    result = page.locator(  # type: ignore[attr-defined]
        ".md-search-result__item",
        has_text="n-gram speculative decoding on Kimi-K2.5",
    )
    result.first.wait_for(timeout=15_000)
    assert result.count() >= 1


def test_hostile_record_executes_nothing(browser: object, served: str) -> None:
    dialogs: list[str] = []
    page = browser.new_page()  # type: ignore[attr-defined]
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{served}/records/2026-11-29-hostile/", wait_until="networkidle")
    assert page.evaluate("() => window.__pwned === undefined")
    page.get_by_text("click me").first.click()
    assert page.evaluate("() => window.__pwned === undefined") and dialogs == []
    title = page.locator("h1").first.inner_text()
    assert "<script>" in title  # shown as text
    page.screenshot(path=str(ARTIFACTS / "record-hostile.png"), full_page=True)
