"""What a change did to a sweep's verdict: its cells and best configurations that differ.

`kbgen diff`'s rows for them (`review.diff` puts them on a record's change): a cell whose
verdict changed, appeared or went; a load level whose best configuration or its probability did.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbgen.kb.cards import LoadItems, cell_words, load_items, load_words
from kbgen.kb.models import Best, Cell, Load, Record


@dataclass(frozen=True)
class CellRow:
    """One cell of a sweep on both sides (None: absent there): a variant at a load level in one
    class, against the baseline, at the family's interval."""

    variant: str
    load: Load
    cls: str
    base_outcome: str | None
    head_outcome: str | None
    base_effect: float | None
    head_effect: float | None
    head_ci: tuple[float, float] | None

    @property
    def where(self) -> str:
        """`k3 at concurrency 8`."""
        return cell_words(self.variant, self.load)


@dataclass(frozen=True)
class BestRow:
    """A sweep's best configuration at one load level on both sides (None: absent there)."""

    load: Load
    base_variant: str | None
    head_variant: str | None
    base_probability: float | None
    head_probability: float | None

    @property
    def at(self) -> str:
        """`concurrency 8`; empty for a sweep of one load."""
        return load_words(self.load)


def cell_rows(old: Record | None, new: Record | None) -> list[CellRow]:
    """A sweep's cells whose verdict differs between the sides, or that are on one side only
    (every cell of a new sweep), by variant, load and class."""
    before, after = _cells(old), _cells(new)
    rows = []
    for key in sorted(before.keys() | after.keys()):
        b, a = before.get(key), after.get(key)
        if b == a:
            continue
        either = a or b
        assert either is not None
        ci = (a.ci_low, a.ci_high) if a and a.ci_low is not None and a.ci_high is not None else None
        rows.append(
            CellRow(
                either.variant,
                either.load,
                either.prompt_class,
                str(b.outcome) if b else None,
                str(a.outcome) if a else None,
                b.effect if b else None,
                a.effect if a else None,
                ci,
            )
        )
    return rows


def _cells(record: Record | None) -> dict[tuple[str, LoadItems, str], Cell]:
    cells = record.verdict.cells if record is not None and record.verdict else []
    return {(c.variant, load_items(c.load), c.prompt_class): c for c in cells}


def best_rows(old: Record | None, new: Record | None) -> list[BestRow]:
    """A sweep's load levels whose best configuration or its probability differs between the
    sides, or that are on one side only."""
    before, after = _best(old), _best(new)
    rows = []
    for key in sorted(before.keys() | after.keys()):
        b, a = before.get(key), after.get(key)
        if (
            b is not None
            and a is not None
            and (b.variant, b.probability_best)
            == (
                a.variant,
                a.probability_best,
            )
        ):
            continue
        either = a or b
        assert either is not None
        rows.append(
            BestRow(
                either.load,
                b.variant if b else None,
                a.variant if a else None,
                b.probability_best if b else None,
                a.probability_best if a else None,
            )
        )
    return rows


def _best(record: Record | None) -> dict[LoadItems, Best]:
    best = record.verdict.best if record is not None and record.verdict else []
    return {load_items(b.load): b for b in best}
