"""A sweep's record page: its family of comparisons, every cell, the best configuration at each
load and the throughput-latency front, as the record's YAML holds them: in the page kbgen
renders, and on the built site as headless Chromium reads it, with JavaScript and without."""

from __future__ import annotations

import html
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import yaml

from kbgen.kb.models import Load
from kbgen.record import write
from tests.conftest import REPO
from tests.site.conftest import Site, mkdocs, serve
from tests.support import sweeps
from tests.support.hostile import problems, to_html

ID = "2026-12-02-draft-lengths"
LOADS: list[Load] = [{"concurrency": 1}, {"concurrency": 8}]
# k3 decodes faster at one stream and slower at eight; k__5 (a name Markdown would escape) is
# slower at one stream and the baseline's equal at eight
TRUTH = {"base": [10.0, 14.0], "ngram_gpu-k3": [8.0, 16.0], "k__5": [12.0, 14.0]}
ARTIFACTS = REPO / "test-artifacts"


def _records(root: Path) -> Path:
    """A knowledge base of one sweep's record and its samples file, as `kbgen record` writes."""
    records = root / "records"
    records.mkdir(parents=True)
    evidence = sweeps.closed_loop(
        np.random.default_rng(3), TRUTH, LOADS, classes=("coding", "math")
    )
    write.write(records / f"{ID}.yaml", sweeps.record(evidence, ID, samples=True), evidence)
    return records


def _yaml(records: Path, record: str = ID) -> dict[str, Any]:
    """The record's verdict as a plain reader of its file sees it."""
    data = yaml.safe_load((records / f"{record}.yaml").read_text())
    return cast(dict[str, Any], data["verdict"])


def _load(load: dict[str, int]) -> str:
    return ", ".join(f"{key.replace('_', ' ')} {n}" for key, n in load.items())


def _best_line(best: dict[str, Any]) -> str:
    """The line the page must show for one load's best configuration."""
    ties = best.get("ties") or []
    return (
        f"At {_load(best['load'])}: {best['variant']} (probability best "
        f"{best['probability_best']:.3g}; "
        + (
            f"cannot be told apart: {', '.join(ties)}"
            if ties
            else "every other is worse with confidence"
        )
        + (f"; excluded: {', '.join(best['excluded'])}" if best.get("excluded") else "")
        + ")"
        + (
            ": best over the classes' average, not in each: "
            + ", ".join(f"{cls} {arm}" for cls, arm in best["per_class"].items())
            if len(set((best.get("per_class") or {}).values())) > 1
            else ""
        )
    )


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _table(page: str, heading: str) -> list[list[str]]:
    """The body rows of the first table after `heading` (its id), each cell's text."""
    after = page.split(f'id="{heading}"', 1)[1]
    body = after.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [
        [_text(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def test_the_page_shows_every_cell_the_best_and_the_front_as_recorded(
    tmp_path: Path, site: Site
) -> None:
    records = _records(tmp_path)
    verdict = _yaml(records)
    page = to_html(site(records)[f"records/{ID}.md"])
    assert problems(page) == []
    family = verdict["family"]
    assert f"A sweep: {family['comparisons']} comparisons in the record" in _text(page)

    items = re.findall(r"<li (data-kbgen-best [^>]*)>(.*?)</li>", page, re.S)
    assert len(items) == len(verdict["best"]) == len(LOADS)
    for (attributes, inner), best in zip(items, verdict["best"], strict=True):
        assert _text(inner) == _best_line(best)
        marked = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', attributes))
        assert marked["variant"] == best["variant"] and marked["load"] == _load(best["load"])
        assert float(marked["probability-best"]) == best["probability_best"]

    cells = _table(page, "every-cell")
    assert len(cells) == len(verdict["cells"]) == 2 * len(LOADS) * 2
    level = f"{family['cell_confidence']:.2%}"
    assert f"<th>{level} interval</th>" in page
    for row, cell in zip(cells, verdict["cells"], strict=True):
        interval = f"{cell['ci_low']:+.1%} … {cell['ci_high']:+.1%}"
        assert row[:6] == [
            cell["variant"],
            _load(cell["load"]),
            cell["class"],
            cell["outcome"],
            f"{cell['effect']:+.1%}",
            interval,
        ]

    front = _table(page, "throughput-against-latency")
    assert len(front) == len(verdict["pareto"]) == len(TRUTH) * len(LOADS)
    for row, point in zip(front, verdict["pareto"], strict=True):
        assert row[0] == f"{point['variant']} at {_load(point['load'])}"
        shown = [row[1], *row[2].split(" / "), *row[3].split(" / ")]
        figures = ("output_tok_s", "tpot_ms_median", "tpot_ms_p99", "ttft_ms_median", "ttft_ms_p99")
        for value, name in zip(shown, figures, strict=True):
            assert float(value.replace(",", "")) == pytest.approx(point[name], rel=5e-4)
        by = ", ".join(
            f"{d['variant']} at {_load(d['load'])}" for d in point.get("dominated_by", [])
        )
        assert row[4] == ("on the front" if point["on_front"] else f"dominated by {by}")
        assert row[5] == f"{point['dominance']:.1%}"
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg"') == 3  # the metric's, and two


def test_an_a_b_page_shows_no_sweep(kb_dir: Path, site: Site) -> None:
    page = site(kb_dir)["records/ngram-test.md"]
    assert "## Every configuration" not in page and "data-kbgen" not in page


H200 = "2026-12-02-ngram-sweep-h200-pinned"  # the example knowledge base's sweep, measured


@pytest.fixture(scope="module", params=[ID, H200])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built with --strict, of the synthetic sweep's knowledge base (`ID`), or of the
    example knowledge base with its H200 sweep (`H200`); `built.name` is the record's id."""
    root = tmp_path_factory.mktemp("sweep")
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    if request.param == ID:
        _records(root)
    else:
        shutil.copytree(REPO / "records", root / "records")
    made = mkdocs("build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(root / "site"))
    assert made.returncode == 0, made.stderr
    (root / "site" / ".record").write_text(request.param)
    return root / "site"


@pytest.fixture(scope="module")
def served(built: Path) -> Iterator[str]:
    yield from serve(built)


# each point of a chart as the browser draws it: its data-* attributes, its dot's fill and centre
POINTS = """(points) => points.map((g) => {
  const dot = g.querySelector("circle"), box = dot.getBoundingClientRect();
  return {...g.dataset, fill: dot.getAttribute("fill"),
          x: box.x + box.width / 2, y: box.y + box.height / 2, shown: box.width > 0};
})"""


def test_chromium_reads_the_chart_and_the_best_line_as_the_yaml_holds_them(
    browser: object, served: str, built: Path
) -> None:
    """The done-criterion of sweeps' part 5: each point of both charts, where the browser draws
    it, and each load's best-configuration line, read from the built page, are the YAML's: of
    the synthetic sweep, and of the H200 sweep in the example knowledge base."""
    record = (built / ".record").read_text()
    verdict = _yaml(built.parent / "records", record)
    page: Any = cast(Any, browser).new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{served}/records/{record}/", wait_until="networkidle")

    lines = page.locator("article li[data-kbgen-best]")
    assert lines.count() == len(verdict["best"])
    for i, best in enumerate(verdict["best"]):
        line = lines.nth(i)
        assert line.is_visible()
        assert " ".join(line.inner_text().split()) == _best_line(best)
        assert line.get_attribute("data-variant") == best["variant"]
        assert float(line.get_attribute("data-probability-best")) == best["probability_best"]

    for latency in ("tpot", "ttft"):
        chart = page.locator(f"article figure svg[data-kbgen-pareto={latency}]")
        chart.scroll_into_view_if_needed()
        assert chart.is_visible()
        shown = chart.locator("g.point").evaluate_all(POINTS)
        assert len(shown) == len(verdict["pareto"])
        for mark, point in zip(shown, verdict["pareto"], strict=True):
            assert (mark["variant"], mark["load"]) == (point["variant"], _load(point["load"]))
            assert float(mark["outputTokS"]) == point["output_tok_s"]
            assert float(mark["medianMs"]) == point[f"{latency}_ms_median"]
            assert float(mark["p99Ms"]) == point[f"{latency}_ms_p99"]
            assert mark["onFront"] == str(point["on_front"]).lower()
            assert (mark["fill"] != "#fff") == point["on_front"] and mark["shown"]
        # drawn where its figures put it: more throughput higher up, more latency further right
        # (never the other way; figures within a pixel of each other may share one)
        for a in shown:
            for b in shown:
                if float(a["outputTokS"]) > float(b["outputTokS"]):
                    assert a["y"] <= b["y"], (a, b)
                if float(a["p99Ms"]) > float(b["p99Ms"]):
                    assert a["x"] >= b["x"], (a, b)
        ARTIFACTS.mkdir(exist_ok=True)
        chart.screenshot(path=str(ARTIFACTS / f"{record}-pareto-{latency}.png"))
    assert errors == []
    page.close()


def test_the_chart_and_the_best_lines_need_no_javascript(
    browser: object, served: str, built: Path
) -> None:
    record = (built / ".record").read_text()
    verdict = _yaml(built.parent / "records", record)
    context: Any = cast(Any, browser).new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{served}/records/{record}/")
    assert page.locator("article li[data-kbgen-best]").count() == len(verdict["best"])
    points = page.locator("article svg[data-kbgen-pareto] g.point").count()
    assert points == 2 * len(verdict["pareto"])
    assert page.locator("article svg[data-kbgen-pareto=tpot]").is_visible()
    context.close()
