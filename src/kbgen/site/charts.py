"""Static SVG charts of a record: pure functions from a record to SVG text, byte-deterministic.

Hand-written, inline in the page, every label escaped. See docs/design.md, "Charts".
"""

from __future__ import annotations

import math
from html import escape

from kbgen.kb.cards import configuration_words
from kbgen.kb.models import METRIC_UNITS, ParetoPoint, Range, Record, baseline_first
from kbgen.site.formats import load as load_words

WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 30, 60
COLOURS = ["#5c6bc0", "#ef6c00", "#26a69a", "#ab47bc", "#8d6e63"]
KEY_WIDTH, KEY_ROW = 140, 18  # a variant's place in a chart's key, and a row of the key


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def _bars(
    title: str,
    groups: list[str],
    series: list[tuple[str, list[tuple[float, float, float] | None]]],
    unit: str,
    top: float | None = None,
) -> str:
    """Grouped bars; each value is (value, low, high) for its whisker, or None when missing."""
    values = [v for _, row in series for v in row if v is not None]
    peak = top or max((v[2] for v in values), default=1.0) or 1.0
    peak = _nice(peak)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    group_w = plot_w / max(len(groups), 1)
    bar_w = group_w * 0.8 / max(len(series), 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="kbgen-chart" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'style="max-width:100%;height:auto" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        # scoped: the chart sits inline in a page and must not restyle the page
        "<style>.kbgen-chart text{font:12px sans-serif;fill:#555}.kbgen-chart .axis{stroke:#999}"
        ".kbgen-chart .grid{stroke:#ddd}.kbgen-chart .w{stroke:#333;stroke-width:1.5}</style>",
        f'<text x="{LEFT}" y="18">{escape(title)}</text>',
    ]
    for i in range(5):
        value = peak * i / 4
        y = TOP + plot_h - plot_h * i / 4
        parts.append(
            f'<line class="grid" x1="{LEFT}" y1="{_fmt(y)}" x2="{WIDTH - RIGHT}" y2="{_fmt(y)}"/>'
        )
        parts.append(f'<text x="{LEFT - 6}" y="{_fmt(y + 4)}" text-anchor="end">{value:g}</text>')
    parts.append(
        f'<text x="14" y="{TOP + plot_h / 2:.1f}" transform="rotate(-90 14 '
        f'{TOP + plot_h / 2:.1f})" text-anchor="middle">{escape(unit)}</text>'
    )

    def y_of(value: float) -> float:
        return TOP + plot_h - plot_h * min(value, peak) / peak

    for g, group in enumerate(groups):
        x0 = LEFT + g * group_w + group_w * 0.1
        for s, (_, row) in enumerate(series):
            point = row[g]
            if point is None:
                continue
            value, low, high = point
            x = x0 + s * bar_w
            parts.append(
                f'<rect x="{_fmt(x)}" y="{_fmt(y_of(value))}" width="{_fmt(bar_w * 0.9)}" '
                f'height="{_fmt(TOP + plot_h - y_of(value))}" '
                f'fill="{COLOURS[s % len(COLOURS)]}"><title>{escape(series[s][0])}: '
                f"{value:.4g}</title></rect>"
            )
            if high > low:
                cx = x + bar_w * 0.45
                parts.append(
                    f'<line class="w" x1="{_fmt(cx)}" y1="{_fmt(y_of(low))}" '
                    f'x2="{_fmt(cx)}" y2="{_fmt(y_of(high))}"/>'
                )
        parts.append(
            f'<text x="{_fmt(x0 + group_w * 0.4)}" y="{HEIGHT - BOTTOM + 16}" '
            f'text-anchor="middle">{escape(group)}</text>'
        )
    parts.append(
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" '
        f'y2="{TOP + plot_h}"/>'
    )
    for s, (name, _) in enumerate(series):
        x = LEFT + s * 140
        parts.append(
            f'<rect x="{x}" y="{HEIGHT - 22}" width="12" height="12" '
            f'fill="{COLOURS[s % len(COLOURS)]}"/>'
        )
        parts.append(f'<text x="{x + 16}" y="{HEIGHT - 12}">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _nice(value: float) -> float:
    """A round axis top at or above `value`."""
    if value <= 0:
        return 1.0
    exponent = 10.0 ** math.floor(math.log10(value))
    top = next(s * exponent for s in (1, 2, 2.5, 5, 10) if s * exponent >= value)
    return float(top) if math.isfinite(top) else value  # near the largest float: no rounder top


def metric(record: Record) -> str | None:
    """Bars of the primary metric per class and variant, or None without measurements."""
    if record.hypothesis is None or not record.measurements or record.config is None:
        return None
    name = record.hypothesis.primary_metric
    variants = baseline_first(record.config.baseline, record.config.variants)
    classes = sorted({c for v in record.measurements.values() for c in v})
    series = []
    for variant in variants:
        row: list[tuple[float, float, float] | None] = []
        for cls in classes:
            stats = record.measurements.get(variant, {}).get(cls, {}).get(name)
            if stats is None:
                row.append(None)
                continue
            low, high = stats.interval() or (stats.mean, stats.mean)
            row.append((stats.mean, low, high))
        series.append((variant, row))
    if not any(v for _, row in series for v in row):
        return None
    return _bars(
        f"{name} by prompt class (mean, 95% interval of the mean)",
        classes,
        series,
        METRIC_UNITS[name],
    )


def acceptance(record: Record) -> str | None:
    """Bars of the acceptance rate at each draft position, or None without such figures."""
    series = []
    positions = 0
    for variant, stats in sorted(record.spec_decode.items()):
        rates = stats.per_position_acceptance or []
        positions = max(positions, len(rates))
        row: list[tuple[float, float, float] | None] = []
        for rate in rates:
            if rate is None:
                row.append(None)
            elif isinstance(rate, Range):
                row.append(((rate.low + rate.high) / 2, rate.low, rate.high))
            else:
                row.append((rate, rate, rate))
        series.append((variant, row))
    if not positions:
        return None
    series = [(name, row + [None] * (positions - len(row))) for name, row in series]
    return _bars(
        "acceptance rate by draft position, per drafted step",
        [str(i + 1) for i in range(positions)],
        series,
        "rate",
        top=1.0,
    )


LATENCIES = {"tpot": "TPOT", "ttft": "TTFT"}


def pareto(record: Record, latency: str) -> str | None:
    """A sweep's configurations as points of aggregate output tokens/s against `latency`'s p99
    (`tpot` or `ttft`), a line back to its median; filled on the front, hollow when dominated,
    the front joined on the TPOT chart (the one whose latency decides it). None without points."""
    verdict = record.verdict
    name = LATENCIES[latency]
    points = [
        (p, low, high)
        for p in (verdict.pareto if verdict else [])
        if (low := getattr(p, f"{latency}_ms_median")) is not None
        and (high := getattr(p, f"{latency}_ms_p99")) is not None
    ]
    if not points or record.config is None:
        return None
    variants = baseline_first(record.config.baseline, record.config.variants)
    keys = list(dict.fromkeys(k for p, _, _ in points for k in p.load))
    title = f"output tok/s against {name} p99, every configuration"
    described = (
        f"Each configuration (a variant at a load) is a dot at its aggregate output tokens/s and "
        f"its p99 {name}, with a line back to its median {name}; labelled with its load "
        f"({', '.join(k.replace('_', ' ') for k in keys) or 'one load'}). Filled: on the front "
        "(no other configuration is faster at a lower p99 TPOT with confidence); hollow: "
        "dominated. On the front: " + ", ".join(_at(p) for p, _, _ in points if p.on_front) + "."
    )
    x_top = _nice(max(high for _, _, high in points))
    y_top = _nice(max(p.output_tok_s for p, _, _ in points))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x_of(value: float) -> float:
        return LEFT + plot_w * min(value, x_top) / x_top

    def y_of(value: float) -> float:
        return TOP + plot_h - plot_h * min(value, y_top) / y_top

    shown = [v for v in variants if any(p.variant == v for p, _, _ in points)]
    per_row = (WIDTH - LEFT) // KEY_WIDTH  # the key's rows: as many as its variants need
    height = HEIGHT + KEY_ROW * (math.ceil(len(shown) / per_row) - 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="kbgen-chart" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'style="max-width:100%;height:auto" aria-label="{escape(title)}" '
        f'data-kbgen-pareto="{escape(latency)}">',
        f"<title>{escape(title)}</title>",
        f"<desc>{escape(described)}</desc>",
        "<style>.kbgen-chart text{font:12px sans-serif;fill:#555}.kbgen-chart .axis{stroke:#999}"
        ".kbgen-chart .grid{stroke:#ddd}.kbgen-chart .w{stroke:#333;stroke-width:1.5}"
        ".kbgen-chart .front{stroke:#999;stroke-dasharray:4 3;fill:none}</style>",
        f'<text x="{LEFT}" y="18">{escape(title)}</text>',
        # the key to the dots, right of the title
        f'<circle cx="{WIDTH - RIGHT - 175}" cy="14" r="5" fill="#555" stroke="#555" '
        'stroke-width="2"/>',
        f'<text x="{WIDTH - RIGHT - 165}" y="18">on the front</text>',
        f'<circle cx="{WIDTH - RIGHT - 75}" cy="14" r="5" fill="#fff" stroke="#555" '
        'stroke-width="2"/>',
        f'<text x="{WIDTH - RIGHT - 65}" y="18">dominated</text>',
    ]
    for i in range(5):
        y, x = TOP + plot_h - plot_h * i / 4, LEFT + plot_w * i / 4
        parts += [
            f'<line class="grid" x1="{LEFT}" y1="{_fmt(y)}" x2="{WIDTH - RIGHT}" y2="{_fmt(y)}"/>',
            f'<text x="{LEFT - 6}" y="{_fmt(y + 4)}" text-anchor="end">{y_top * i / 4:g}</text>',
            f'<text x="{_fmt(x)}" y="{TOP + plot_h + 16}" text-anchor="middle">'
            f"{x_top * i / 4:g}</text>",
        ]
    parts += [
        f'<text x="14" y="{TOP + plot_h / 2:.1f}" transform="rotate(-90 14 '
        f'{TOP + plot_h / 2:.1f})" text-anchor="middle">tok/s</text>',
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{TOP + plot_h + 32}" text-anchor="middle">'
        f"{escape(name)}, ms (dot: p99; line: to the median)</text>",
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" '
        f'y2="{TOP + plot_h}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}"/>',
    ]
    if latency == "tpot":
        front = sorted((high, p.output_tok_s) for p, _, high in points if p.on_front)
        joined = " ".join(f"{_fmt(x_of(x))},{_fmt(y_of(y))}" for x, y in front)
        parts.append(f'<polyline class="front" points="{joined}"/>')
    for p, low, high in points:
        colour = COLOURS[variants.index(p.variant) % len(COLOURS)]
        x, y = x_of(high), y_of(p.output_tok_s)
        tip = (
            f"{_at(p)}: {p.output_tok_s:.4g} tok/s, {name} median {low:.4g} ms, p99 "
            f"{high:.4g} ms; " + ("on the front" if p.on_front else "dominated")
        )
        parts += [
            f'<g class="point" data-variant="{escape(p.variant)}" '
            f'data-load="{escape(load_words(p.load))}" data-output-tok-s="{p.output_tok_s!r}" '
            f'data-median-ms="{low!r}" data-p99-ms="{high!r}" '
            f'data-on-front="{str(p.on_front).lower()}">',
            f"<title>{escape(tip)}</title>",
            f'<line x1="{_fmt(x_of(low))}" y1="{_fmt(y)}" x2="{_fmt(x)}" y2="{_fmt(y)}" '
            f'stroke="{colour}" stroke-width="1.5"/>',
            f'<circle cx="{_fmt(x)}" cy="{_fmt(y)}" r="5" stroke="{colour}" stroke-width="2" '
            f'fill="{colour if p.on_front else "#fff"}"/>',
            f'<text x="{_fmt(x + 8)}" y="{_fmt(y - 6)}">'
            f"{escape('/'.join(str(v) for v in p.load.values()))}</text>",
            "</g>",
        ]
    for s, variant in enumerate(shown):
        x, y = LEFT + (s % per_row) * KEY_WIDTH, HEIGHT + KEY_ROW * (s // per_row)
        parts += [
            f'<rect x="{x}" y="{y - 22}" width="12" height="12" '
            f'fill="{COLOURS[variants.index(variant) % len(COLOURS)]}"/>',
            f'<text x="{x + 16}" y="{y - 12}">{escape(variant)}</text>',
        ]
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _at(point: ParetoPoint) -> str:
    """A configuration in words: `k3 at concurrency 8`."""
    return configuration_words(point.variant, point.load)


def for_record(record: Record) -> dict[str, str]:
    """The charts a record has, by name."""
    made = {
        "metric": metric(record),
        "acceptance": acceptance(record),
        "pareto_tpot": pareto(record, "tpot"),
        "pareto_ttft": pareto(record, "ttft"),
    }
    return {name: svg for name, svg in made.items() if svg is not None}
