"""A sweep's verdict box as data for its template: its grid, best per load, caveats by kind.

A caveat's kind is read from its text by the rules in `KINDS` (a cell's caveat is written `WHERE,
CLASS: TEXT`, the judged variant's `CLASS: TEXT`); one no rule knows is shown under "other"."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources

from kbgen.kb.cards import configuration_words
from kbgen.kb.models import Load, Verdict
from kbgen.site.formats import load as load_words
from kbgen.site.index import LOAD_SHORT

STYLESHEET = "verdict.css"  # beside the records' pages in the site (mkdocs.yml's extra_css)


@dataclass(frozen=True)
class GridCell:
    """One cell of the grid: a variant at a load in a class, against the baseline there."""

    variant: str
    load: str  # in words, `concurrency 8`; `–` for the one load
    cls: str
    outcome: str
    effect: float | None
    ci_low: float | None
    ci_high: float | None
    judged: bool  # the verdict's own variant at its load: what the headline's outcome is of


@dataclass(frozen=True)
class Column:
    """A column of the grid: one variant at one load."""

    variant: str
    load: str  # in words
    short: str  # `c8`: the load as the column's heading says it


@dataclass(frozen=True)
class Grid:
    """Every cell of a sweep, a row per class and a column per variant at a load, the columns of
    one variant side by side (`variants`: each variant and how many columns it has)."""

    variants: list[tuple[str, int]]
    columns: list[Column]
    rows: list[tuple[str, list[GridCell | None]]]

    def cells(self) -> list[GridCell]:
        return [cell for _, row in self.rows for cell in row if cell is not None]


def short(load: Load) -> str:
    """A load as a column heading: `c8`, `c8/256tok`; `–` for the one load."""
    said = [LOAD_SHORT.get(name, name + " {}").format(value) for name, value in load.items()]
    return "/".join(said) or "–"


def grid(verdict: Verdict) -> Grid:
    """The grid of `verdict`'s cells, variants, loads and classes in the order the cells first
    name them."""
    variants = list(dict.fromkeys(c.variant for c in verdict.cells))
    loads = list(dict.fromkeys(load_words(c.load) for c in verdict.cells))
    shorts = {load_words(c.load): short(c.load) for c in verdict.cells}
    classes = list(dict.fromkeys(c.prompt_class for c in verdict.cells))
    judged = (verdict.variant, load_words(verdict.load))
    found = {
        (c.variant, load_words(c.load), c.prompt_class): GridCell(
            c.variant,
            load_words(c.load),
            c.prompt_class,
            c.outcome,
            c.effect,
            c.ci_low,
            c.ci_high,
            (c.variant, load_words(c.load)) == judged,
        )
        for c in verdict.cells
    }
    columns = [
        Column(variant, load, shorts[load])
        for variant in variants
        for load in loads
        if any((variant, load, cls) in found for cls in classes)
    ]
    counts = [(v, sum(c.variant == v for c in columns)) for v in variants]
    rows = [(cls, [found.get((c.variant, c.load, cls)) for c in columns]) for cls in classes]
    return Grid(counts, columns, rows)


@dataclass(frozen=True)
class Kind:
    """A kind of caveat: how to tell one (`pattern`, on its text, its figure in group `n`),
    what else said of the same cells belongs with it (`also`, each with its words), and how a
    group of them reads (`summary`, given `{range}` of the figures, `{cells}` and `{of}`)."""

    key: str
    pattern: re.Pattern[str]
    summary: str
    figure: str = "{:g}"  # how one figure of the range is written
    also: tuple[tuple[re.Pattern[str], str], ...] = ()


KINDS = (
    Kind(
        "drift-holds",
        re.compile(r"the drift across rounds could change it \(rounds disagree by (?P<n>[\d.]+)%"),
        "the drift could change the outcome in {cells} of {of} cells (rounds disagree by "
        "{range}%): more rounds would tell",
    ),
    Kind(
        "one-round",
        re.compile(r"arms confounded with time"),
        "arms confounded with time (one round) in {cells} of {of} cells",
    ),
    Kind(
        "straddles",
        re.compile(r"its interval contains the minimum effect"),
        "the interval contains the minimum effect in {cells} of {of} cells",
    ),
    Kind(
        "different-outputs",
        re.compile(r"the arms generated different outputs for (?P<n>\d+) of \d+ prompts"),
        "different outputs in {cells} of {of} cells ({range} prompts each)",
        also=(
            (
                re.compile(r"decided on all prompts \(.* is a per-token figure\)"),
                "decided per token",
            ),
            (
                re.compile(r"decided on the \d+ prompts whose outputs agree"),
                "decided on those that agree",
            ),
        ),
    ),
    Kind(
        "drift",
        re.compile(r"an arm drifted (?P<n>[\d.]+)% across rounds"),
        "arms drifted {range}% across rounds in {cells} of {of} cells",
        figure="{:.1f}",
    ),
    Kind(
        "skew",
        re.compile(r"effects are skewed \(skewness (?P<n>[-+]?[\d.]+)"),
        "effects skewed (skewness {range}) in {cells} of {of} cells: the interval may miss more "
        "often than its level says",
        figure="{:+.1f}",
    ),
    Kind(
        "no-hash",
        re.compile(r"prompts have outputs without a hash"),
        "outputs without a hash in {cells} of {of} cells: whether the texts agree is unknown",
    ),
    Kind(
        "busy",
        re.compile(r"windows ran on a busy machine"),
        "a busy machine in {cells} of {of} cells",
    ),
)
OTHER = "other"


@dataclass(frozen=True)
class Caveat:
    """One caveat, and the cell it is of (variant at load, class; None: the whole record)."""

    where: str  # `ngram at concurrency 8, coding`; empty for the whole record
    text: str
    cells: frozenset[tuple[str, str, str]] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Group:
    """Caveats of one kind: its summary (a line) and every caveat in it, cell by cell."""

    kind: str
    summary: str
    caveats: list[Caveat]


def located(verdict: Verdict) -> list[Caveat]:
    """`verdict`'s caveats and its cells' reasons, each once, with the cells they are of."""
    classes = list(dict.fromkeys(c.prompt_class for c in verdict.cells))
    configurations = {
        configuration_words(c.variant, c.load): (c.variant, load_words(c.load))
        for c in verdict.cells
    }
    # the longest first: `ngram-k1 at …` is not `ngram`'s
    wheres = sorted(configurations, key=len, reverse=True)
    judged = (
        configuration_words(verdict.variant, verdict.load),
        verdict.variant,
        load_words(verdict.load),
    )
    out: dict[tuple[str, str], Caveat] = {}
    reasons = [
        f"{configuration_words(c.variant, c.load)}, {c.prompt_class}: {c.reason}"
        for c in verdict.cells
        if c.reason
    ]
    for said in [*verdict.caveats, *reasons]:
        caveat = _located(said, wheres, configurations, classes, judged)
        out.setdefault((caveat.where, caveat.text), caveat)
    return list(out.values())


def _located(
    said: str,
    wheres: Sequence[str],
    configurations: dict[str, tuple[str, str]],
    classes: Sequence[str],
    judged: tuple[str, str, str],
) -> Caveat:
    for at in wheres:
        variant, load = configurations[at]
        if said.startswith(at + ", "):
            cls, _, text = said[len(at) + 2 :].partition(": ")
            if text and cls in classes:
                return Caveat(f"{at}, {cls}", text, frozenset({(variant, load, cls)}))
        if said.startswith(at + ": "):  # of the configuration: every class of it
            cells = frozenset((variant, load, cls) for cls in classes)
            return Caveat(at, said[len(at) + 2 :], cells)
    cls, _, text = said.partition(": ")
    if text and cls in classes:
        return Caveat(f"{judged[0]}, {cls}", text, frozenset({(judged[1], judged[2], cls)}))
    return Caveat("", said)


def kind_of(text: str) -> Kind | None:
    """The kind of a caveat's text (its cell's words taken off); None: no rule knows it."""
    for kind in KINDS:
        if kind.pattern.search(text) or any(p.search(text) for p, _ in kind.also):
            return kind
    return None


def groups(verdict: Verdict) -> list[Group]:
    """`verdict`'s caveats about its cells grouped by kind, in `KINDS`' order, each summarised
    with its count of cells and the range of its figures; those no rule knows last ("other").
    Caveats about the whole record are left out (`whole_record`)."""
    total = len({(c.variant, load_words(c.load), c.prompt_class) for c in verdict.cells})
    found: dict[str, list[Caveat]] = {}
    for caveat in located(verdict):
        if caveat.cells:
            kind = kind_of(caveat.text)
            found.setdefault(kind.key if kind else OTHER, []).append(caveat)
    out = [
        Group(kind.key, summary(kind, found[kind.key], total), found[kind.key])
        for kind in KINDS
        if kind.key in found
    ]
    if OTHER in found:
        cells = len(frozenset().union(*(c.cells for c in found[OTHER])))
        said = f"{len(found[OTHER])} other caveats in {cells} of {total} cells"
        out.append(Group(OTHER, said, found[OTHER]))
    return out


def whole_record(verdict: Verdict) -> list[str]:
    """What limits the verdict as a whole: its reasons, then its caveats that name no cell."""
    return list(
        dict.fromkeys([*verdict.reasons, *(c.text for c in located(verdict) if not c.cells)])
    )


def summary(kind: Kind, caveats: Sequence[Caveat], total: int) -> str:
    """A group's line: `kind.summary` with the count of its cells and the range of its
    figures, and what else was said of them (`kind.also`), with its count where that is not
    every cell of the group."""
    main = [c for c in caveats if kind.pattern.search(c.text)]
    cells = frozenset().union(*(c.cells for c in main or caveats))
    figures = [
        float(m["n"]) for c in main if (m := kind.pattern.search(c.text)) and "n" in m.groupdict()
    ]
    said = kind.summary.format(range=span(figures, kind.figure), cells=len(cells), of=total)
    extra = []
    for pattern, words in kind.also:
        there = frozenset().union(*(c.cells for c in caveats if pattern.search(c.text)))
        if there:
            extra.append(words if there >= cells else f"{words} in {len(there)}")
    return f"{said}: {', '.join(extra)}" if extra else said


def span(figures: Iterable[float], form: str) -> str:
    """The range of `figures`, each written by `form`: `3.3–5.8`, `-1.8 to +2.3` (signed), one
    figure where they agree; empty for none."""
    ordered = sorted(figures)
    if not ordered:
        return ""
    low, high = form.format(ordered[0]), form.format(ordered[-1])
    if low == high:
        return low
    return f"{low} to {high}" if low.startswith(("+", "-")) else f"{low}–{high}"


@dataclass(frozen=True)
class BestAt:
    """The best configuration at one load, in words."""

    load: str
    variant: str
    probability: float
    ties: list[str]


def best(verdict: Verdict) -> list[BestAt]:
    """The best configuration at each load of `verdict`."""
    return [BestAt(load_words(b.load), b.variant, b.probability_best, b.ties) for b in verdict.best]


@dataclass(frozen=True)
class Box:
    """What a sweep's verdict box shows, top to bottom."""

    grid: Grid
    best: list[BestAt]
    whole: list[str]
    groups: list[Group]


def box(verdict: Verdict) -> Box | None:
    """The verdict box of a record with cells (a sweep); None for one without."""
    if not verdict.cells:
        return None
    return Box(grid(verdict), best(verdict), whole_record(verdict), groups(verdict))


@functools.cache
def stylesheet() -> str:
    """The stylesheet that colours the grid by outcome and keeps the box compact: kbgen's own
    file (`assets/verdict.css`), the same for every knowledge base."""
    return (resources.files("kbgen.site") / "assets" / STYLESHEET).read_text(encoding="utf-8")
