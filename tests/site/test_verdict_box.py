"""A sweep's verdict box (`site.verdict_box`): its grid is the record's cells, as the YAML holds
them and as the page shows them; its caveats are grouped by kind, each group summed up with its
count and range; and nothing a record says runs on the page."""

from __future__ import annotations

import html.parser
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import yaml

from kbgen.kb.models import Cell, Record, Verdict
from kbgen.record import rule, write
from kbgen.site import verdict_box
from tests.conftest import REPO
from tests.site.conftest import Site, mkdocs, serve
from tests.support import sweeps
from tests.support.hostile import PAYLOADS, problems, to_html

SWEEPS = sorted(
    path.stem
    for path in (REPO / "records").glob("*.yaml")
    if (yaml.safe_load(path.read_text()).get("verdict") or {}).get("cells")
)
ARTIFACTS = REPO / "test-artifacts"
H100, SWEEP = "2026-12-06-eagle3-k1-h100-pinned", "2026-12-02-ngram-sweep-h200-pinned"


def _words(load: dict[str, Any]) -> str:
    return ", ".join(f"{key.replace('_', ' ')} {n}" for key, n in load.items()) or "–"


def _yaml_cells(name: str) -> dict[tuple[str, str, str], str]:
    """Each cell's outcome, by variant, load and class, as a plain reader of the YAML sees it."""
    cells = yaml.safe_load((REPO / "records" / f"{name}.yaml").read_text())["verdict"]["cells"]
    found = {(c["variant"], _words(c["load"]), c["class"]): c["outcome"] for c in cells}
    assert len(found) == len(cells)
    return found


def test_the_committed_sweeps_are_those_the_issue_names() -> None:
    assert {H100, SWEEP, "2026-12-04-eagle3-sweep-h200-pinned"} <= set(SWEEPS)


@pytest.mark.parametrize("name", SWEEPS)
def test_the_grid_is_the_yaml_s_cells(name: str) -> None:
    """Every cell once, with its outcome, in the row of its class and the column of its variant
    at its load; the verdict's own variant at its load outlined."""
    data = yaml.safe_load((REPO / "records" / f"{name}.yaml").read_text())
    verdict = Record.model_validate(data).verdict
    assert verdict is not None
    grid = verdict_box.grid(verdict)
    shown = {(c.variant, c.load, c.cls): c.outcome for c in grid.cells()}
    assert len(grid.cells()) == len(shown)
    assert shown == _yaml_cells(name)
    for cls, row in grid.rows:
        assert len(row) == len(grid.columns)
        for column, cell in zip(grid.columns, row, strict=True):
            assert cell is None or (cell.variant, cell.load, cell.cls) == (
                column.variant,
                column.load,
                cls,
            )
    assert [v for v, _ in grid.variants] == list(dict.fromkeys(c.variant for c in grid.columns))
    assert sum(n for _, n in grid.variants) == len(grid.columns)
    judged = {(c.variant, c.load) for c in grid.cells() if c.judged}
    assert judged == {(verdict.variant, _words(dict(verdict.load)))}


class _Grid(html.parser.HTMLParser):
    """The cells of a page's verdict grid (`data-kbgen-grid`), by their data attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.inside, self.cells = False, list[dict[str, str | None]]()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.inside |= tag == "table" and "data-kbgen-grid" in found
        if self.inside and tag == "td" and "data-outcome" in found:
            self.cells.append(found)

    def handle_endtag(self, tag: str) -> None:
        self.inside &= tag != "table"


def _page_cells(page: str) -> dict[tuple[str, str, str], str]:
    parser = _Grid()
    parser.feed(page)
    found = {
        (str(c["data-variant"]), str(c["data-load"]), str(c["data-class"])): str(c["data-outcome"])
        for c in parser.cells
    }
    assert len(found) == len(parser.cells)
    return found


@pytest.mark.parametrize("name", SWEEPS)
def test_the_page_s_grid_is_the_yaml_s_cells(name: str) -> None:
    """The committed page (the same as a render: test_render's example-site test) shows each
    cell's outcome as the YAML holds it, coloured by it."""
    page = (REPO / "docs" / "records" / f"{name}.md").read_text()
    assert _page_cells(page) == _yaml_cells(name)
    for outcome in set(_yaml_cells(name).values()):
        assert f'<td class="kbgen-{outcome}' in page


def test_the_verdict_box_comes_first_and_the_decision_after_it() -> None:
    """What a reader needs in ten seconds is at the top: the box (its grid, best per load and
    why) before any other section; the author's decision right after it."""
    page = (REPO / "docs" / "records" / f"{SWEEP}.md").read_text()
    grid, best, why = (page.index(s) for s in ("data-kbgen-grid", "Best per load", "Why:"))
    assert grid < best < why < page.index("\n## ")
    decided = (REPO / "docs" / "records" / "2026-11-29-ngram-spec-decode-kimi-k2-5.md").read_text()
    assert decided.index("!!! ") < decided.index("## Decision") < decided.index("\n## Context")


KINDS = [
    ("an arm drifted 5.7% across rounds (more than half the minimum effect)", "drift"),
    (
        "the drift across rounds could change it (rounds disagree by 31.9%; more rounds, not "
        "more prompts, would tell)",
        "drift-holds",
    ),
    ("the arms generated different outputs for 7 of 8 prompts", "different-outputs"),
    (
        "decided on all prompts (decode_tok_s is a per-token figure), though they compare "
        "different texts",
        "different-outputs",
    ),
    ("decided on the 6 prompts whose outputs agree", "different-outputs"),
    ("the prompts' effects are skewed (skewness +2.3 over 8): at few units …", "skew"),
    ("the rounds' effects are skewed (skewness -1.1 over 4): at few units …", "skew"),
    (f"{rule.STRADDLES} (+5%)", "straddles"),
    (f"{rule.CONFOUNDED}: two rounds (AB, then BA) would separate them", "one-round"),
    (f"{rule.CONFOUNDED}, accepted by the spec ({rule.ACCEPT_FIELD})", "one-round"),
    ("2 of 8 prompts have outputs without a hash: whether both arms …", "no-hash"),
    ("3 of 12 windows ran on a busy machine (other processes up to 40% …)", "busy"),
    ("a caveat no rule knows", None),
]


@pytest.mark.parametrize(("text", "kind"), KINDS)
def test_a_caveat_s_kind_is_read_from_its_text(text: str, kind: str | None) -> None:
    found = verdict_box.kind_of(text)
    assert (found.key if found else None) == kind


@pytest.mark.parametrize("name", SWEEPS)
def test_every_caveat_of_the_committed_sweeps_is_of_a_known_kind_and_cell(name: str) -> None:
    """The rules know what kbgen's guards write (rule.py): no committed caveat is "other", and
    each but those about the whole record is of a cell of its record."""
    verdict = Record.model_validate(
        yaml.safe_load((REPO / "records" / f"{name}.yaml").read_text())
    ).verdict
    assert verdict is not None
    groups = verdict_box.groups(verdict)
    assert verdict_box.OTHER not in [g.kind for g in groups]
    whole = verdict_box.whole_record(verdict)  # its reasons, then what names no cell
    assert whole[: len(verdict.reasons)] == verdict.reasons
    assert set(whole[len(verdict.reasons) :]) <= set(verdict.caveats)
    listed = [c for g in groups for c in g.caveats]
    assert len(listed) + len(whole) - len(verdict.reasons) == len(verdict_box.located(verdict))
    cells = set(_yaml_cells(name))
    assert all(c.cells and c.cells <= cells for c in listed)


def _cell(variant: str, cls: str, outcome: str = "refuted") -> Cell:
    load = {"concurrency": 8}
    return Cell.model_validate({"variant": variant, "load": load, "class": cls, "outcome": outcome})


def _verdict(caveats: list[str]) -> Verdict:
    cells = [_cell(v, c) for v in ("ngram", "ngram-k1") for c in ("coding", "math")]
    cells[-1] = _cell("ngram-k1", "math", "inconclusive").model_copy(update={"reason": "few"})
    return Verdict(
        outcome="refuted",
        variant="ngram",
        method="samples",
        rule="r",
        load={"concurrency": 8},
        cells=cells,
        caveats=caveats,
        reasons=["a reason about the whole record"],
    )


def test_caveats_are_grouped_by_kind_with_their_cells_count_and_range() -> None:
    verdict = _verdict(
        [
            "ngram at concurrency 8, coding: an arm drifted 3.3% across rounds (more …)",
            "ngram-k1 at concurrency 8, math: an arm drifted 5.8% across rounds (more …)",
            "ngram at concurrency 8, coding: the arms generated different outputs for 3 of 8 "
            "prompts",
            "ngram at concurrency 8, coding: decided on all prompts (decode_tok_s is a "
            "per-token figure), though they compare different texts",
            "ngram-k1 at concurrency 8, coding: the arms generated different outputs for 5 of 8 "
            "prompts",
            "ngram-k1 at concurrency 8, coding: decided on the 3 prompts whose outputs agree",
            "math: its interval contains the minimum effect (+5%)",  # the judged variant's
            "ngram at concurrency 8: 1 of 4 windows ran on a busy machine (…)",  # every class
            "the record's hypothesis differs from the spec's; the record's was used",
        ]
    )
    groups = {g.kind: g for g in verdict_box.groups(verdict)}
    assert {kind: g.summary for kind, g in groups.items()} == {
        "straddles": "the interval contains the minimum effect in 1 of 4 cells",
        "different-outputs": "different outputs in 2 of 4 cells (3–5 prompts each): decided "
        "per token in 1, decided on those that agree in 1",
        "drift": "arms drifted 3.3–5.8% across rounds in 2 of 4 cells",
        "busy": "a busy machine in 2 of 4 cells",
        "other": "1 other caveats in 1 of 4 cells",
    }
    assert list(groups) == ["straddles", "different-outputs", "drift", "busy", "other"]
    assert [(c.where, c.text) for c in groups["straddles"].caveats] == [
        ("ngram at concurrency 8, math", "its interval contains the minimum effect (+5%)")
    ]
    assert [c.where for c in groups["drift"].caveats] == [
        "ngram at concurrency 8, coding",
        "ngram-k1 at concurrency 8, math",  # not `ngram`'s: the longest name first
    ]
    assert [(c.where, c.text) for c in groups["other"].caveats] == [
        ("ngram-k1 at concurrency 8, math", "few")  # a cell's reason is one of its caveats
    ]
    assert verdict_box.whole_record(verdict) == [
        "a reason about the whole record",
        "the record's hypothesis differs from the spec's; the record's was used",
    ]


def test_a_record_without_cells_has_no_box() -> None:
    assert verdict_box.box(_verdict([]).model_copy(update={"cells": []})) is None


@pytest.mark.parametrize(
    ("figures", "form", "shown"),
    [
        ([3.3], "{:.1f}", "3.3"),
        ([5.8, 3.3, 4.0], "{:.1f}", "3.3–5.8"),
        ([3.31, 3.34], "{:.1f}", "3.3"),
        ([2.3, -1.8], "{:+.1f}", "-1.8 to +2.3"),
        ([], "{:g}", ""),
    ],
)
def test_a_range_of_figures_reads_low_to_high(figures: list[float], form: str, shown: str) -> None:
    assert verdict_box.span(figures, form) == shown


def test_nothing_a_sweep_s_caveats_say_runs_on_its_page(tmp_path: Path, site: Site) -> None:
    """The box is an HTML block Markdown does not read: every caveat, in the grid's groups and
    the whole record's list, reaches the page as text."""
    records = tmp_path / "records"
    records.mkdir()
    evidence = sweeps.closed_loop(
        np.random.default_rng(3),
        {"base": [10.0, 14.0], "k__5": [8.0, 16.0]},
        [{"concurrency": 1}, {"concurrency": 8}],
        classes=("coding", "math"),
    )
    record = sweeps.record(evidence, "hostile-sweep")
    assert record.verdict is not None
    caveats = [f"k__5 at concurrency 1, coding: {text}" for text in PAYLOADS] + PAYLOADS
    verdict = record.verdict.model_copy(update={"caveats": caveats})
    write.write(
        records / "hostile-sweep.yaml", record.model_copy(update={"verdict": verdict}), None
    )
    page = site(records)["records/hostile-sweep.md"]
    box = page[page.index('<div class="admonition') : page.index("</div>\n\n") + 6]
    assert "data-kbgen-grid" in box and 'data-variant="k__5"' in box
    assert problems(to_html(page)) == []
    assert "<script" not in box.lower() and "<img" not in box.lower()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The example knowledge base's site, built with --strict and served."""
    root = tmp_path_factory.mktemp("kb")
    for name in ("docs", "records"):
        shutil.copytree(REPO / name, root / name)
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    built = mkdocs("build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(root / "site"))
    assert built.returncode == 0, built.stderr
    yield from serve(root / "site")


# where each part of the box is, from the top of the page, and each cell as the browser has it
READ = """() => {
  const top = (s) => { const e = document.querySelector(s);
                       return e ? e.getBoundingClientRect().top + window.scrollY : null; };
  return {
    grid: top("article [data-kbgen-grid]"), best: top("article .kbgen-verdict-best"),
    why: top("article .kbgen-why details"),
    cells: [...document.querySelectorAll("article [data-kbgen-grid] td[data-outcome]")].map(
      (td) => ({...td.dataset, colour: getComputedStyle(td).backgroundColor,
                shown: td.getBoundingClientRect().width > 0})),
  };
}"""


@pytest.mark.parametrize("name", [H100, SWEEP])
def test_chromium_shows_the_yaml_s_cells_and_the_why_in_the_first_screen(
    browser: object, served: str, name: str
) -> None:
    """The done-criterion of issue 42's part 5: the grid the reader sees is the YAML's cells,
    each coloured by its outcome, and the grid, the best per load and the why all start within
    the first screen of a 1280 × 800 window; a kind of caveat opens to its cells."""
    page: Any = cast(Any, browser).new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{served}/records/{name}/", wait_until="networkidle")
    read = page.evaluate(READ)
    shown = {(c["variant"], c["load"], c["class"]): c["outcome"] for c in read["cells"]}
    assert len(shown) == len(read["cells"]) and shown == _yaml_cells(name)
    assert all(c["shown"] for c in read["cells"])
    colours = {c["outcome"]: c["colour"] for c in read["cells"]}
    assert len(set(colours.values())) == len(colours)  # one colour per outcome
    assert all(colour != "rgba(0, 0, 0, 0)" for colour in colours.values())
    assert 0 < read["grid"] < read["best"] < read["why"] < 800
    first = page.locator("article .kbgen-why details").first
    assert first.locator("li").first.is_hidden()
    first.locator("summary").click()
    assert first.locator("li").first.is_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("article .kbgen-verdict").screenshot(path=str(ARTIFACTS / f"{name}-verdict.png"))
    assert errors == []
    page.close()
