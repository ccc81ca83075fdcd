"""How the pages write numbers: a figure, a change, a share and a load; `–` where there is none."""

from __future__ import annotations

from kbgen.kb.models import Load


def number(value: float | None, digits: int = 3) -> str:
    """A figure to `digits` significant digits, thousands whole: `62.6`, `1,234`."""
    if value is None:
        return "–"
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def percent(value: float | None) -> str:
    """A change, signed: `+9.0%`, `-26.0%`."""
    return "–" if value is None else f"{value:+.1%}"


def percent_plain(value: float | None) -> str:
    """A share, such as 0.8 → 80%."""
    return "–" if value is None else f"{value:.0%}"


def load(value: Load) -> str:
    """A sweep's load level in words: `concurrency 8`, `concurrency 8, max tokens 256`; `–` for
    the one load."""
    return ", ".join(f"{key.replace('_', ' ')} {n}" for key, n in value.items()) or "–"
