"""A record's SVG charts: well-formed, one bar per figure, whiskers where known, names escaped;
a sweep's points of throughput against latency where its record puts them."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from kbgen.kb.models import Record
from kbgen.site import charts
from tests.conftest import RECORD
from tests.support import sweeps
from tests.support.records import load_record

SVG = "{http://www.w3.org/2000/svg}"
PLANNED = "schema_version: 1\nid: ngram-test\ntitle: Later\nstatus: planned\ncreated: 2026-11-29\n"


def record_of(tmp_path: Path, text: str = RECORD) -> Record:
    path = tmp_path / "ngram-test.yaml"
    path.write_text(text)
    return load_record(path)


def parsed(svg: str) -> ET.Element:
    """The chart as XML: it must be well-formed, whatever the record's names held."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and root.get("class") == "kbgen-chart"
    assert svg.endswith("</svg>\n")
    return root


def bars(root: ET.Element) -> dict[str, str]:
    """The bars' tooltips (`variant: value`), by variant: a legend swatch has no tooltip."""
    found: dict[str, list[str]] = {}
    for rect in root.iter(f"{SVG}rect"):
        tip = rect.find(f"{SVG}title")
        if tip is not None and tip.text:
            name, value = tip.text.rsplit(": ", 1)
            found.setdefault(name, []).append(value)
    return {name: ",".join(values) for name, values in found.items()}


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def groups(root: ET.Element) -> list[str]:
    """The labels under the groups of bars, left to right."""
    below = str(charts.HEIGHT - charts.BOTTOM + 16)
    return [t.text or "" for t in root.iter(f"{SVG}text") if t.get("y") == below]


def whiskers(root: ET.Element) -> int:
    return sum(1 for line in root.iter(f"{SVG}line") if line.get("class") == "w")


def test_metric_chart_has_a_bar_per_variant_and_class_and_whiskers_where_known(
    tmp_path: Path,
) -> None:
    svg = charts.metric(record_of(tmp_path))
    assert svg is not None
    root = parsed(svg)
    title = "decode_tok_s by prompt class (mean, 95% interval of the mean)"
    assert root.findtext(f"{SVG}title") == title and root.get("aria-label") == title
    assert bars(root) == {"baseline": "62.6", "ngram": "46.4"}
    assert whiskers(root) == 1  # the baseline has n and stdev; the n-gram figure has no stdev
    assert groups(root) == ["coding"]
    labels = texts(root)
    assert "tok/s" in labels and {"baseline", "ngram"} <= set(labels)  # the unit, the legend


def test_acceptance_chart_has_a_bar_per_draft_position(tmp_path: Path) -> None:
    svg = charts.acceptance(record_of(tmp_path))
    assert svg is not None
    root = parsed(svg)
    assert root.findtext(f"{SVG}title") == "acceptance rate by draft position, per drafted step"
    assert bars(root) == {"ngram": "0.5,0.3,0.1,0.05,0.01"}
    assert whiskers(root) == 0  # exact rates: nothing to whisker
    assert groups(root) == ["1", "2", "3", "4", "5"]
    assert {"0", "0.25", "0.5", "0.75", "1"} <= set(texts(root))  # the axis tops at a rate of 1


def test_a_rate_known_as_a_range_is_its_midpoint_with_whiskers(tmp_path: Path) -> None:
    text = RECORD.replace("[0.5, 0.3, 0.1,", "[{low: 0.4, high: 0.6}, null, 0.1,")
    svg = charts.acceptance(record_of(tmp_path, text))
    assert svg is not None
    root = parsed(svg)
    assert bars(root) == {"ngram": "0.5,0.1,0.05,0.01"}  # no bar where the rate is unknown
    assert whiskers(root) == 1


VARIANT, CLASS = '<script>alert("v")</script>', "a & b"


def test_names_are_escaped(tmp_path: Path) -> None:
    """Names are slugs in a valid record; the charts escape them all the same."""
    record = record_of(tmp_path)
    assert record.config is not None

    def variant(name: str) -> str:
        return VARIANT if name == "ngram" else name

    evil = record.model_copy(
        update={
            "config": record.config.model_copy(
                update={"variants": {variant(k): v for k, v in record.config.variants.items()}}
            ),
            "measurements": {
                variant(name): {CLASS: classes["coding"]}
                for name, classes in record.measurements.items()
            },
            "spec_decode": {variant(name): s for name, s in record.spec_decode.items()},
        }
    )
    made = charts.for_record(evil)
    assert set(made) == {"metric", "acceptance"}
    for svg in made.values():
        assert "<script" not in svg and "a & b" not in svg
        root = parsed(svg)  # well-formed: every name was escaped
        assert VARIANT in bars(root) and VARIANT in texts(root)
    assert groups(parsed(made["metric"])) == [CLASS]
    assert "&lt;script&gt;" in made["metric"] and "a &amp; b" in made["metric"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PLANNED, set()),
        (
            RECORD[: RECORD.index("measurements:")] + RECORD[RECORD.index("spec_decode:") :],
            {"acceptance"},
        ),
        (
            RECORD.replace("    per_position_acceptance: [0.5, 0.3, 0.1, 0.05, 0.01]\n", ""),
            {"metric"},
        ),
        (RECORD.replace("[0.5, 0.3, 0.1, 0.05, 0.01]", "[]"), {"metric"}),
        (RECORD, {"metric", "acceptance"}),
    ],
    ids=["planned", "no-measurements", "no-acceptance", "empty-acceptance", "both"],
)
def test_a_record_has_the_charts_its_figures_allow(
    tmp_path: Path, text: str, expected: set[str]
) -> None:
    assert set(charts.for_record(record_of(tmp_path, text))) == expected


def test_the_primary_metric_unmeasured_means_no_metric_chart(tmp_path: Path) -> None:
    text = RECORD.replace("primary_metric: decode_tok_s", "primary_metric: ttft_ms")
    assert charts.metric(record_of(tmp_path, text)) is None


def test_charts_are_byte_deterministic(tmp_path: Path) -> None:
    record = record_of(tmp_path)
    assert charts.for_record(record) == charts.for_record(record.model_copy(deep=True))


@pytest.fixture(scope="module")
def sweep() -> Record:
    return sweeps.record(
        sweeps.closed_loop(
            np.random.default_rng(1),
            {"base": [10.0, 14.0], "k3": [8.0, 16.0], "k5": [12.0, 20.0]},
            [{"concurrency": 1}, {"concurrency": 8}],
        )
    )


def points(root: ET.Element) -> list[dict[str, str]]:
    """The chart's points as it marks them: each one's `data-*` attributes, and its dot's fill."""
    found = []
    for g in root.iter(f"{SVG}g"):
        if g.get("class") == "point":
            circle = g.find(f"{SVG}circle")
            assert circle is not None
            found.append({**{k: v for k, v in g.attrib.items()}, "fill": circle.get("fill", "")})
    return found


@pytest.mark.parametrize("latency", ["tpot", "ttft"])
def test_a_sweep_s_front_chart_has_a_point_per_configuration(sweep: Record, latency: str) -> None:
    """Each point where the record puts it, filled on the front and hollow off it; the front
    joined only where its latency decides it."""
    svg = charts.pareto(sweep, latency)
    assert svg is not None and sweep.verdict is not None
    root = parsed(svg)
    assert (
        root.findtext(f"{SVG}title")
        == f"output tok/s against {latency.upper()} p99, every configuration"
    )
    desc = root.findtext(f"{SVG}desc") or ""
    assert desc.startswith("Each configuration") and "On the front: " in desc
    shown = points(root)
    assert len(shown) == len(sweep.verdict.pareto) == 6
    for point, mark in zip(sweep.verdict.pareto, shown, strict=True):
        assert mark["data-variant"] == point.variant
        assert mark["data-load"] == f"concurrency {point.load['concurrency']}"
        assert float(mark["data-output-tok-s"]) == point.output_tok_s
        assert float(mark["data-median-ms"]) == getattr(point, f"{latency}_ms_median")
        assert float(mark["data-p99-ms"]) == getattr(point, f"{latency}_ms_p99")
        assert mark["data-on-front"] == str(point.on_front).lower()
        assert (mark["fill"] != "#fff") == point.on_front
    lines = [p for p in root.iter(f"{SVG}polyline") if p.get("class") == "front"]
    assert len(lines) == (latency == "tpot")
    assert {"1", "8"} <= set(texts(root))  # each point labelled with its load
    assert {"base", "k3", "k5"} <= set(texts(root))  # the legend


def test_an_a_b_record_has_no_front_chart(tmp_path: Path, sweep: Record) -> None:
    assert charts.pareto(record_of(tmp_path), "tpot") is None
    assert set(charts.for_record(sweep)) == {"metric", "pareto_tpot", "pareto_ttft"}
