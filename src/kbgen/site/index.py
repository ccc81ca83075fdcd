"""The records index's table, its columns as data, and the script that sorts and filters it.

`table` makes it in one pass over the records' cards (`COLUMNS`, each value encoded once);
`script` is the browser's part (`assets/index.js`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from kbgen.kb.cards import Card
from kbgen.kb.models import Status
from kbgen.kb.replications import Evidence
from kbgen.site.formats import percent
from kbgen.site.markup import Markdown, to_page

SCRIPT = "index.js"  # beside the index, in the records' folder of the site (mkdocs.yml)


def effect(card: Card) -> str:
    """A record's effect at a glance: its primary metric's change, one class's or the range
    over its classes (`−26.0% … −9.3% decode_tok_s`); `–` without a verdict's numbers."""
    if not card.effects:
        return "–"
    low, high = min(card.effects), max(card.effects)
    change = percent(low) if low == high else f"{percent(low)} … {percent(high)}"
    return f"{change} {card.metric}" if card.metric else change


def verdict(card: Card) -> str:
    """A record's outcome, with each class's where they differ, and its status unless it is
    concluded: `refuted`, `inconclusive (coding: supported, math: inconclusive)`, `refuted ·
    superseded`, `planned`."""
    said = card.outcome
    if said and len({r.outcome for r in card.results}) > 1:
        said += f" ({', '.join(f'{r.cls}: {r.outcome}' for r in card.results)})"
    if card.status == Status.CONCLUDED and said:
        return said
    return f"{said} · {card.status}" if said else str(card.status)


LOAD_SHORT = {"concurrency": "c{}", "max_tokens": "{}tok"}  # `@c8/256tok`


def best(card: Card) -> str:
    """A sweep's best configuration at each load, compactly, with its probability of being the
    best: `best: k3 @c1 (0.97), baseline @c8 (0.61)`; empty for an A/B record."""
    said = []
    for b in card.best:
        at = "/".join(LOAD_SHORT.get(name, name + " {}").format(value) for name, value in b.load)
        said.append(f"{b.variant}{' @' + at if at else ''} ({b.probability:.2f})")
    return f"best: {', '.join(said)}" if said else ""


@dataclass(frozen=True)
class Column:
    """A column of the records index's table: its heading, and its cell for a record's card
    given the questions' labels and the evidence (plain text, which `to_page` encodes; a
    `Markdown` value is printed as is)."""

    heading: str
    cell: Callable[[Card, Mapping[str, str], Evidence], Any]


def _record_link(card: Card, labels: Mapping[str, str], found: Evidence) -> Markdown:
    return Markdown(f"[{to_page(card.title)}]({to_page(card.id)}.md)")


def _verdict_marked(card: Card, labels: Mapping[str, str], found: Evidence) -> str:
    related = found.related(card.id)
    marks = [" · ⚠️ contradicted"] * bool(related.contradictions) + [" · stale"] * bool(
        related.stale
    )
    return verdict(card) + "".join(marks)


def _variant(card: Card, labels: Mapping[str, str], found: Evidence) -> str:
    """The arm judged against the baseline; a sweep's best configuration beside it."""
    compared, said = card.compared or "–", best(card)
    return f"{compared} · {said}" if said else compared


# the script (`SCRIPT`) sorts `Date` newest first and `Effect` by its first number
COLUMNS = (
    Column("Date", lambda card, labels, found: card.when.isoformat()),
    Column("Record", _record_link),
    Column("Verdict", _verdict_marked),
    Column("Effect", lambda card, labels, found: effect(card)),
    Column("Variant", _variant),
    Column("Model", lambda card, labels, found: card.model or "–"),
    Column("Hardware", lambda card, labels, found: card.hardware or "–"),
    Column("Question", lambda card, labels, found: labels.get(card.question or "", "–")),
)


def table(cards: Iterable[Card], labels: Mapping[str, str], found: Evidence) -> Markdown:
    """The records index's table (`COLUMNS`), a row per card in the order given: one
    pass, each distinct value encoded once (a question's label, a model, a date repeat)."""
    encoded: dict[str, Markdown] = {}

    def encode(value: Any) -> Markdown:
        if isinstance(value, Markdown):  # never cached: equal text that is not Markdown is
            return value
        if (page := encoded.get(value)) is None:
            page = encoded[value] = to_page(value)
        return page

    lines = [
        "| " + " | ".join(c.heading for c in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for card in cards:
        cells = (encode(c.cell(card, labels, found)) for c in COLUMNS)
        lines.append(f"| {' | '.join(cells)} |")
    return Markdown("\n".join(lines) + "\n")


@functools.cache
def script() -> str:
    """The records index's script: kbgen's own file (`assets/index.js`), the same for every
    knowledge base."""
    return (resources.files("kbgen.site") / "assets" / SCRIPT).read_text(encoding="utf-8")
