"""The interleaved design: which arm runs when, what each window sends, where a run looks.

Rounds of the arms in an order that cancels a linear drift (`order`), a sweep's load levels
inside each arm's start (`windows`), each round's requests shuffled alike for every arm
(`round_requests`), and the looks of a design that stops when decided (`Design`, read from a
workload once by `design_of`). docs/design.md, "The order of the arms" and "Stopping".
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kbgen.kb.models import baseline_first
from kbgen.run.spec import ExperimentSpec, WorkloadSpec


@dataclass(frozen=True, order=True)
class Key:
    """One measured request of the plan: which variant, class, prompt, repeat, round and load
    level."""

    variant: str
    prompt_class: str
    prompt_index: int
    repeat: int
    round: int = 0
    level: int = 0


@dataclass(frozen=True)
class Looked:
    """What a look at the samples so far found: whether every class is decided (the run
    stops), and the variants that leave a sweep's race, each with why."""

    decided: bool = False
    drop: dict[str, str] = field(default_factory=dict)


# a look at round `round`'s end, when every arm racing has run each round (a look inside a
# window sees one arm's newest requests only: any drift becomes effect)
Look = Callable[[int], Looked]
Listen = Callable[[], Looked]  # what was decided elsewhere (a Ray run's other blocks' looks)


Step = tuple[int, str, int]  # (round, arm, load level): one measurement window
Stored = tuple[int, str] | tuple[int, str, int]  # a step as run.json keeps it


def order(spec: ExperimentSpec) -> list[tuple[int, str]]:
    """The (round, arm) runs in the order they run.

    One round: baseline first. More: round 0 a permutation of the arms seeded by `order_seed`,
    each next round the reverse of the one before: over an even number of rounds every arm's
    mean position in time is the same (a linear drift cancels), and the arm that ends a round
    starts the next on the server already running.
    """
    arms = baseline_first(spec.baseline, spec.variants)
    rounds = spec.workload.rounds
    if rounds == 1:
        return [(0, arm) for arm in arms]
    first = random.Random(f"kbgen-order:{spec.workload.order_seed}").sample(arms, len(arms))
    return [(r, arm) for r in range(rounds) for arm in (first if r % 2 == 0 else first[::-1])]


def windows(spec: ExperimentSpec) -> list[Stored]:
    """The measurement windows in the order they run, as run.json keeps them: `order`'s
    [round, arm], and a sweep's with several loads [round, arm, level]: inside an arm's start
    its load levels run one after the other, in the round's direction (ascending, then
    descending), so that no load needs a start of its own."""
    levels = range(len(spec.loads))
    if len(levels) == 1:
        return list(order(spec))
    return [(r, arm, x) for r, arm in order(spec) for x in (levels if r % 2 == 0 else levels[::-1])]


def steps(stored: list[Stored]) -> list[Step]:
    """run.json's order as (round, arm, level) steps (level 0 for a run of one load)."""
    return [(s[0], s[1], s[2] if len(s) > 2 else 0) for s in stored]


def round_requests(workload: WorkloadSpec, suite: dict[str, list[str]], round: int) -> list[Key]:
    """A round's requests of one arm (its variant left empty), in the order they are sent.

    Repeat by repeat through the classes; with `rounds` > 1 shuffled (but a trace), seeded by
    `order_seed` and the round, so every arm of a round sends the same sequence and a prompt's
    place in it changes at random from round to round.
    """
    keys = [
        Key("", cls, index, repeat, round)
        for repeat in range(workload.repeats)
        for cls in workload.classes
        for index in range(len(suite[cls]))
    ]
    if workload.rounds > 1 and workload.trace is None:  # a trace is sent in its own order
        random.Random(f"kbgen-prompts:{workload.order_seed}:{round}").shuffle(keys)
    return keys


def plan(
    spec: ExperimentSpec, suite: dict[str, list[str]], planned: list[Step] | None = None
) -> list[Key]:
    """Every request to measure, in the order it is sent: window by window of `planned`
    (default: the spec's), each window's requests as `round_requests` gives them."""
    return [
        dataclasses.replace(key, variant=arm, level=level)
        for round_, arm, level in (steps(windows(spec)) if planned is None else planned)
        for key in round_requests(spec.workload, suite, round_)
    ]


@dataclass(frozen=True)
class Design:
    """A design that stops when decided: at most `rounds` rounds."""

    rounds: int

    def looks(self) -> list[int]:
        """The rounds a look may stop in: every round from the second (two rounds, one of each
        order, are the fewest with a drift check), the one round of a one-round design."""
        return [0] if self.rounds == 1 else list(range(1, self.rounds))

    def alpha_at(self, round_: int, alpha: float) -> float | None:
        """The error the looks inside round `round_` spend, of `alpha` in all: half of it in
        the first round that may stop, a quarter in the next, and so on, scaled to sum to
        `alpha`; None in a round that may not stop."""
        looks = self.looks()
        if round_ not in looks:
            return None
        k = looks.index(round_)
        return alpha * 0.5 ** (k + 1) / (1 - 0.5 ** len(looks))

    def level_at(self, last_round: int, confidence: float) -> float | None:
        """The confidence a look at round `last_round`'s end decides at: 1 - its share of
        the error (`alpha_at`), so that every look together errs at most 1 - `confidence`
        (Bonferroni over the looks, whatever their dependence); None where it may not stop."""
        spent = self.alpha_at(last_round, 1 - confidence)
        return None if spent is None else 1 - spent


class Stops(Protocol):
    """What a workload says about stopping: the spec's, or a record's."""

    @property
    def rounds(self) -> int | None: ...

    @property
    def stop(self) -> str | None: ...


def design_of(workload: Stops) -> Design | None:
    """The stopping design a workload ran (at most its rounds), or None for a fixed one."""
    return Design(workload.rounds or 1) if workload.stop == "when-decided" else None
