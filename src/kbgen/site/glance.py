"""A record at a glance, from its card, as a plan page shows it under the task it resolves.

Its figures with their intervals, its drafts' acceptance, a sweep's best configuration per load
and the cells it refuted, each in words."""

from __future__ import annotations

from kbgen.kb.cards import Card, cell_words
from kbgen.kb.cards import load_words as card_load_words
from kbgen.site.formats import percent
from kbgen.site.markup import Markdown, to_page


def interval(value: float | None, bounds: tuple[float, float] | None = None) -> Markdown:
    """A change with its 95% interval, `-26.0% [-30.0% … -20.0%]`; the change alone without."""
    if bounds is None:
        return Markdown(percent(value))
    # numbers and brackets only, and no page has a link definition for `[low … high]` to use
    return Markdown(f"{percent(value)} [{percent(bounds[0])} … {percent(bounds[1])}]")


def acceptance(bounds: tuple[float, float] | None) -> str:
    """A draft acceptance rate, `36%`, or the range it was reported as, `17–31%`; under half a
    percent to a tenth (`0.1%`: not `0%`, which it is not)."""
    if bounds is None:
        return "–"
    low, high = (f"{value:.1%}" if 0 < value < 0.005 else f"{value:.0%}" for value in bounds)
    return low if low == high else f"{low.removesuffix('%')}–{high}"


def headline(card: Card) -> Markdown:
    """A record's figures at a glance: its primary metric's change per class with its interval,
    and the judged variant's acceptance (`` `decode_tok_s`: coding -26.0% [-30.0% … -20.0%] ·
    acceptance 17–31%``); empty without them."""
    parts = [f"{to_page(r.cls)} {interval(r.effect, r.interval)}" for r in card.results]
    if parts and card.metric:
        parts[0] = f"{to_page(card.metric, 'code')}: {parts[0]}"
    if card.acceptance is not None:
        parts.append(f"acceptance {acceptance(card.acceptance)}")
    return Markdown(" · ".join(parts))


def best_configuration(card: Card) -> str:
    """A sweep's best configuration at each load, with its probability of being the best and
    the configurations it cannot be told apart from: `at concurrency 1, k3 (probability 0.97);
    at concurrency 8, baseline (probability 0.61; k5 as good)`; empty for an A/B record."""
    said = []
    for best in card.best:
        at = f"at {card_load_words(best.load)}, " if best.load else ""
        ties = f"; {', '.join(best.ties)} as good" if best.ties else ""
        said.append(f"{at}{best.variant} (probability {best.probability:.2f}{ties})")
    return "; ".join(said)


def acceptance_by_position(card: Card) -> str:
    """Each drafting arm's acceptance at each draft position, for a record of more than one
    such arm: `ngram 60% · 42%; eagle3-k1 36%`; empty otherwise (the headline has one arm's)."""
    if len(card.positions) < 2:
        return ""
    return "; ".join(
        f"{arm} {' · '.join(acceptance(rate) for rate in rates)}" for arm, rates in card.positions
    )


def ruled_out(card: Card) -> str:
    """A sweep's refuted cells, each with its classes: `k5 at concurrency 1 (coding); k3 at
    concurrency 8 (coding, math)`; empty when it refuted none (and for an A/B record)."""
    said = []
    for cell in card.cells:
        refuted = [r.cls for r in cell.results if r.outcome == "refuted"]
        if refuted:
            said.append(f"{cell_words(cell.variant, cell.load)} ({', '.join(refuted)})")
    return "; ".join(said)
