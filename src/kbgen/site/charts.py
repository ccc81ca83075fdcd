"""Static SVG charts of a record: pure functions from a record to SVG text, byte-deterministic.

Hand-written, inline in the page, every label escaped. See docs/design.md, "Charts".
"""

from __future__ import annotations

import math
from html import escape

from kbgen.kb.models import METRIC_UNITS, Range, Record, baseline_first

WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 30, 60
COLOURS = ["#5c6bc0", "#ef6c00", "#26a69a", "#ab47bc", "#8d6e63"]


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


def for_record(record: Record) -> dict[str, str]:
    """The charts a record has, by name."""
    made = {"metric": metric(record), "acceptance": acceptance(record)}
    return {name: svg for name, svg in made.items() if svg is not None}
