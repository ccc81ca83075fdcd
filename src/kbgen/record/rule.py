"""The rule a verdict is decided by, as data: the guards and the rule's text, made from them.

Each guard holds its name, its words in the record and its check; `toward` is the one place the
hypothesis' direction turns into a sign. See docs/design.md, "The verdict and its guards".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kbgen.kb.models import Hypothesis, Outcome, Unit
from kbgen.record import stats
from kbgen.record.stats import Effect
from kbgen.run.counters import Counters
from kbgen.run.samples import Sample

CONFIDENCE = 0.95
# why a sweep's cell at a `sweep_step` level is not decided
UNEQUAL_LOADS = (
    "the arms were sent different loads at this step of the tool's sweep (the record's notes "
    "give each arm's): no comparison at one load"
)
# why a class of a design that stops when decided is not decided on its first round alone
EARLY = (
    "one round: a design that stops when decided decides from the second round on (the first "
    "round's arms ran one after the other, confounded with time)"
)
# why a class is not decided where no guard holds it: its interval, not a guard
STRADDLES = "its interval contains the minimum effect"
# why a class measured in one round only is not decided (the ONE_ROUND guard)
CONFOUNDED = "arms confounded with time: one round, the arms run one after the other"
ACCEPT_FIELD = "workload.accept_time_confound"
# why a class of such a design is not decided when no prompt has values in both arms in a round
NO_ROUND = "no prompt has values in both arms in one round: the arms are compared within rounds"
MAX_FAILURE_RATE = 0.05  # per arm and class, failed attempts over attempts, resumes included
MIN_TOKENS = 2  # a request with fewer has no decode phase
SKEWED = 1.0  # a sample skewness beyond it: the distribution is highly skewed (Bulmer's rule)
MIN_ROUNDS = 2  # for output_tok_s, whose unit is the round
BUSY_OTHER_CPU = 25.0  # % of all cores used by other processes: a neighbour as large as a core
BUSY_STEAL = 5.0  # % of CPU time stolen by the hypervisor: the VM's cores are not its own
# metrics that do not grow with the output's length: comparable even where the texts differ
LENGTH_FREE = frozenset({"decode_tok_s", "tpot_ms", "itl_ms", "chunk_gap_ms", "ttft_ms"})
ESTIMATOR = {
    "prompt": "geometric mean of per-prompt ratios (each prompt's ratio of its means over its "
    "requests, variant / baseline, in each round both arms ran it, the rounds of each order of "
    "the arms (AB, BA) weighted half, so that a linear drift cancels)",
    "round": "geometric mean of per-round ratios (each round's window throughput, variant / "
    "baseline)",
    "request": "ratio of the arms' means over requests (unpaired)",
}

# unit -> round -> the unit's requests in that round, each a list of values (one for a
# per-request metric, one per token for a per-token metric, one throughput for a round)
Cells = Mapping[int, Mapping[int, Sequence[Sequence[float]]]]


# --- the hypothesised direction ---------------------------------------------------------------


def toward(hypothesis: Hypothesis, change: float) -> float:
    """A relative change as the hypothesis reads it, positive in its direction: a decrease
    hypothesis reads -8% as +8% (and `toward(h, h.minimum_effect)` is its target change, -5%)."""
    return change if hypothesis.direction == "increase" else -change


def target(hypothesis: Hypothesis) -> tuple[str, str, str]:
    """The target change in the hypothesised direction (`+5%`), and which side of it supports
    the hypothesis and which refutes it (`above`, `below`)."""
    m = f"{toward(hypothesis, hypothesis.minimum_effect):+.0%}"
    beyond, short = ("above", "below") if hypothesis.direction == "increase" else ("below", "above")
    return m, beyond, short


def outcome_of(hypothesis: Hypothesis, low: float, high: float) -> Outcome:
    """Changes from `low` to `high` against the minimum effect in the hypothesised direction:
    all beyond it supported, all short of it refuted, else inconclusive."""
    near, far = sorted((toward(hypothesis, low), toward(hypothesis, high)))
    if near > hypothesis.minimum_effect:
        return Outcome.SUPPORTED
    if far < hypothesis.minimum_effect:
        return Outcome.REFUTED
    return Outcome.INCONCLUSIVE


def interval_outcome(effect: Effect, hypothesis: Hypothesis) -> tuple[Outcome, str]:
    """Supported / refuted / inconclusive from the interval alone, and why when inconclusive."""
    if effect.ci_low is None or effect.ci_high is None:
        return Outcome.INCONCLUSIVE, "no confidence interval (fewer than 2 paired units)"
    outcome = outcome_of(hypothesis, effect.ci_low, effect.ci_high)
    if outcome == Outcome.INCONCLUSIVE:
        return outcome, f"{STRADDLES} ({target(hypothesis)[0]})"
    return outcome, ""


# --- what the guards look at, and what they find ----------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """The arms' outputs compared by hash: the prompts both ran, those where every request of
    both arms produced one and the same hash, and those with a request without a hash."""

    prompts: frozenset[int]
    agree: frozenset[int]
    unknown: frozenset[int]

    @property
    def known(self) -> int:
        return len(self.prompts) - len(self.unknown)

    @property
    def share(self) -> float | None:
        """The share of the prompts with known outputs whose outputs agree."""
        return len(self.agree) / self.known if self.known else None


@dataclass(frozen=True)
class Case:
    """One class before its values are taken: the arms (baseline first), their final samples,
    their failure rates, and at temperature 0 how their outputs agree."""

    hypothesis: Hypothesis
    arms: tuple[str, str]
    samples: Mapping[str, Sequence[Sample]]
    rates: tuple[float, float]
    agreement: Agreement | None = None


@dataclass(frozen=True)
class Values:
    """The values one class is decided on, one `Cells` per arm."""

    arms: tuple[str, str]
    cells: tuple[Cells, Cells]
    metric: str
    unit: Unit

    @property
    def paired(self) -> set[int]:
        """The units with values in both arms."""
        return set(self.cells[0]) & set(self.cells[1])


@dataclass(frozen=True)
class Drift:
    """How the rounds moved: the larger arm's drift against itself, and the range of the
    per-round effects (log scale) over the rounds that have one."""

    most: float
    spread: float
    rounds: int


@dataclass(frozen=True)
class Decision:
    """One class's effect as its interval decides it, the units behind it (the fewer requests of
    the two arms where unpaired) and its drift across rounds (None with one round)."""

    hypothesis: Hypothesis
    unit: Unit
    effect: Effect
    outcome: Outcome
    units: int
    drift: Drift | None = None
    orders: int = 2  # how many of the two orders of the arms (AB, BA) the units ran in
    time_confound_ok: bool = False  # the spec accepts arms confounded with time
    grouped: bool = False  # the units are groups of prompts (a template, a source)


@dataclass(frozen=True)
class Finding:
    """What guards found: reasons that make the overall outcome inconclusive, a reason that makes
    the class inconclusive whatever its interval says (`hold`), and caveats; `keep`, the prompts
    to decide on (None: all); `lifts`, whether more units would lift what holds the class."""

    refusals: tuple[str, ...] = ()
    hold: str = ""
    caveats: tuple[str, ...] = ()
    keep: frozenset[int] | None = None
    lifts: bool = False


NOTHING = Finding()


@dataclass(frozen=True)
class Guard:
    """A rule that can hold a verdict back: its name, its words in the record, and its check on
    the stage of judging it looks at (one guard looks at two)."""

    name: str
    text: Callable[[Hypothesis, Unit], str]
    windows: Callable[[Sequence[Counters]], Finding] | None = None
    samples: Callable[[Case], Finding] | None = None
    values: Callable[[Values], Finding] | None = None
    effect: Callable[[Decision], Finding] | None = None


# --- the guards, in the order the record states them ------------------------------------------


def minimum_units(hypothesis: Hypothesis, unit: Unit) -> int:
    """The paired units (requests per arm, where unpaired) a class needs to be decided."""
    return MIN_ROUNDS if unit == "round" else hypothesis.min_prompts


def _count_text(hypothesis: Hypothesis, unit: Unit) -> str:
    n = minimum_units(hypothesis, unit)
    return {
        "prompt": f"at least {n} distinct prompts per class with data in both arms",
        "round": f"at least {n} rounds with a window in both arms",
        "request": f"at least {n} requests per arm and class",
    }[unit]


def _count(decision: Decision) -> Finding:
    needed = minimum_units(decision.hypothesis, decision.unit)
    if decision.units >= needed:
        return NOTHING
    if decision.unit == "request":
        return Finding(hold=f"fewer than {needed} requests per arm", lifts=True)
    units = "prompt groups" if decision.grouped else f"{decision.unit}s"
    return Finding(
        hold=f"{decision.units} paired {units}; a class needs at least {needed}", lifts=True
    )


COUNT = Guard("count", _count_text, effect=_count)


def _failures(case: Case) -> Finding:
    baseline, variant = case.rates
    caveats = (
        (
            f"the variant failed more often than the baseline ({variant:.1%} vs {baseline:.1%} "
            "of attempts)",
        )
        if variant > baseline
        else ()
    )
    worst = max(case.rates)
    if worst <= MAX_FAILURE_RATE:
        return Finding(caveats=caveats)
    arm = case.arms[case.rates.index(worst)]
    return Finding(
        hold=f"{worst:.1%} of {arm}'s attempts failed (limit {MAX_FAILURE_RATE:.0%})",
        caveats=caveats,
    )


FAILURES = Guard(
    "failures",
    lambda _hypothesis, _unit: (
        f"failed attempts at most {MAX_FAILURE_RATE:.0%} of an arm's attempts in a class, "
        "attempts a resume replaced included; more failures in the variant than in the "
        "baseline is a caveat"
    ),
    samples=_failures,
)


def _short(case: Case) -> Finding:
    refusals = []
    for arm in case.arms:
        mine = case.samples[arm]
        short = sum(1 for s in mine if (s.metrics().get("output_tokens") or 0) < MIN_TOKENS)
        if mine and short > len(mine) / 2:
            refusals.append(
                f"most of {arm}'s requests made fewer than {MIN_TOKENS} tokens "
                f"({short} of {len(mine)})"
            )
    return Finding(refusals=tuple(refusals))


def _unusable(values: Values) -> Finding:
    if values.paired:
        return NOTHING
    missing = [arm for arm, cells in zip(values.arms, values.cells, strict=True) if not cells]
    return Finding(
        refusals=(
            f"no usable {values.metric} in {' and '.join(missing)}"
            if missing
            else f"no {values.unit} with {values.metric} in both arms",
        )
    )


USABLE = Guard(
    "usable-data",
    lambda _hypothesis, _unit: (
        f"a class without usable data, or where most of an arm's requests made fewer than "
        f"{MIN_TOKENS} tokens, makes the overall outcome inconclusive"
    ),
    samples=_short,  # on every final sample, before the same-output guard picks prompts
    values=_unusable,  # on the values the class is decided on
)


def _tokens(windows: Sequence[Counters]) -> Finding:
    checked = [w for w in windows if w.tokens_match is not None and w.generation_tokens is not None]
    disagree = any(w.tokens_match is False for w in checked)
    unchecked = len(windows) - len(checked)
    caveats: tuple[str, ...] = ()
    if not windows:
        caveats = ("no /metrics window: the client's token counts are not cross-checked",)
    elif unchecked:
        caveats = (
            f"{unchecked} of {len(windows)} windows have no client/server token cross-check (a "
            "failed /metrics scrape, no generation-token counter, or an import)",
        )
    return Finding(
        refusals=("client and server token counts disagree",) if disagree else (),
        caveats=caveats,
    )


TOKENS = Guard(
    "token-counts",
    lambda _hypothesis, _unit: (
        "client and server token counts agree in every window; a window without the "
        "cross-check (failed /metrics scrape) is a caveat"
    ),
    windows=_tokens,
)


def _busy(windows: Sequence[Counters]) -> Finding:
    loads = [w.load for w in windows if w.load is not None]
    heavy = [
        x
        for x in loads
        if x.other_cpu_percent > BUSY_OTHER_CPU or (x.steal_percent or 0.0) > BUSY_STEAL
    ]
    if not heavy:
        return NOTHING
    return Finding(
        caveats=(
            f"{len(heavy)} of {len(windows)} windows ran on a busy machine (other processes up "
            f"to {max(x.other_cpu_percent for x in heavy):.0f}% of all cores, steal up to "
            f"{max(x.steal_percent or 0.0 for x in heavy):.0f}%)",
        )
    )


BUSY = Guard(
    "busy-machine",
    lambda _hypothesis, _unit: (
        f"a window where other processes used more than {BUSY_OTHER_CPU:.0f}% of all cores or "
        f"steal exceeded {BUSY_STEAL:.0f}% is a caveat"
    ),
    windows=_busy,
)


def _widened(effect: Effect, by: float) -> Effect:
    """The interval with `by` (log scale) added on each side."""
    assert effect.ci_low is not None and effect.ci_high is not None
    return Effect(
        effect.effect,
        math.expm1(math.log1p(effect.ci_low) - by),
        math.expm1(math.log1p(effect.ci_high) + by),
        effect.n_baseline,
        effect.n_variant,
    )


def _drifted(decision: Decision) -> Finding:
    """A drift D beyond m / 2 is a caveat; it holds the class when the interval, widened on each
    side by the rounds' disagreement (the range of the per-round effects / the number of rounds:
    what a drift falling between one round's two windows leaves on the average), would decide
    otherwise. More rounds would lift it, not more prompts."""
    drift, outcome = decision.drift, decision.outcome
    if drift is None or drift.most <= decision.hypothesis.minimum_effect / 2:
        return NOTHING
    caveats = (
        f"an arm drifted {drift.most:.1%} across rounds (more than half the minimum effect)",
    )
    widen = drift.spread / drift.rounds if drift.rounds > 1 else 0.0
    if outcome == Outcome.INCONCLUSIVE or not widen:
        return Finding(caveats=caveats)
    if interval_outcome(_widened(decision.effect, widen), decision.hypothesis)[0] == outcome:
        return Finding(caveats=caveats)
    return Finding(
        hold=f"the drift across rounds could change it (rounds disagree by "
        f"{math.expm1(drift.spread):.1%}; more rounds, not more prompts, would tell)",
        caveats=caveats,
    )


DRIFT = Guard(
    "drift",
    lambda hypothesis, _unit: (
        f"an arm drifting more than {hypothesis.minimum_effect / 2:.1%} across rounds (half the "
        "minimum effect) is a caveat, and inconclusive where the interval widened by the "
        "rounds' disagreement would contain the minimum effect"
    ),
    effect=_drifted,
)


def _one_round(decision: Decision) -> Finding:
    if decision.unit == "round" or decision.orders > 1:
        return NOTHING
    if decision.orders == 0:  # the arms' values are of different rounds
        return Finding(hold=NO_ROUND)
    if decision.time_confound_ok:
        return Finding(caveats=(f"{CONFOUNDED}, accepted by the spec ({ACCEPT_FIELD})",))
    return Finding(hold=f"{CONFOUNDED}: two rounds (AB, then BA) would separate them")


ONE_ROUND = Guard(
    "one-round",
    lambda _hypothesis, _unit: (
        "arms measured in one order only (one round) are confounded with time: inconclusive, "
        f"unless the spec accepts it ({ACCEPT_FIELD}), which the verdict then states"
    ),
    effect=_one_round,
)


def _skew(decision: Decision) -> Finding:
    logs = [math.log1p(e) for e in decision.effect.per_unit if e > -1]
    g = stats.skewness(logs) if decision.unit != "request" else None
    if g is None or abs(g) < SKEWED:
        return NOTHING
    return Finding(
        caveats=(
            f"the {decision.unit}s' effects are skewed (skewness {g:+.1f} over {len(logs)}): "
            "at few units a symmetric interval misses on the other side more often than its "
            "level says; more units would tell",
        )
    )


SKEW = Guard(
    "skew",
    lambda _hypothesis, unit: (
        f"{unit}s' effects with a skewness beyond ±{SKEWED:g} are a caveat (at few units the "
        "interval's error may exceed its level)"
    ),
    effect=_skew,
)


def _same_output(case: Case) -> Finding:
    agreement, hypothesis = case.agreement, case.hypothesis
    if agreement is None:
        return NOTHING
    caveats = []
    if agreement.unknown:
        caveats.append(
            f"{len(agreement.unknown)} of {len(agreement.prompts)} prompts have outputs without "
            "a hash: whether both arms generated the same text is unknown"
        )
    differ = agreement.known - len(agreement.agree)
    if not differ:
        return Finding(caveats=tuple(caveats), keep=agreement.prompts)
    caveats.append(
        f"the arms generated different outputs for {differ} of {agreement.known} prompts"
    )
    if len(agreement.agree) >= hypothesis.min_prompts:
        caveats.append(f"decided on the {len(agreement.agree)} prompts whose outputs agree")
        return Finding(caveats=tuple(caveats), keep=agreement.agree)
    metric = hypothesis.primary_metric
    if metric in LENGTH_FREE:
        caveats.append(
            f"decided on all prompts ({metric} is a per-token figure), though they compare "
            "different texts"
        )
        return Finding(caveats=tuple(caveats), keep=agreement.prompts)
    why = (
        f"the arms generated different outputs and {metric} grows with output length (only "
        f"{len(agreement.agree)} prompts agree; {hypothesis.min_prompts} needed)"
    )
    return Finding(refusals=(why,), hold=why, caveats=tuple(caveats), keep=agreement.prompts)


SAME_OUTPUT = Guard(
    "same-output",
    lambda hypothesis, _unit: (
        "at temperature 0, outputs compared across arms by hash: where they differ the class "
        f"is decided on the prompts that agree if at least {hypothesis.min_prompts} do, else "
        "on all prompts when the metric does not grow with output length (inconclusive if it "
        "does)"
    ),
    samples=_same_output,
)

GUARDS = (COUNT, FAILURES, USABLE, TOKENS, BUSY, ONE_ROUND, DRIFT, SKEW, SAME_OUTPUT)


# --- walking them -----------------------------------------------------------------------------


def on_windows(windows: Sequence[Counters]) -> Finding:
    """What the guards find in one variant's measurement windows."""
    return _joined(g.windows(windows) for g in GUARDS if g.windows)


def on_samples(case: Case) -> Finding:
    """What the guards find in one class's samples."""
    return _joined(g.samples(case) for g in GUARDS if g.samples)


def on_values(values: Values) -> Finding:
    """What the guards find in the values one class is decided on."""
    return _joined(g.values(values) for g in GUARDS if g.values)


def on_effect(decision: Decision) -> Finding:
    """What the guards find in one class's effect."""
    return _joined(g.effect(decision) for g in GUARDS if g.effect)


def _joined(found: Iterable[Finding]) -> Finding:
    """Every refusal and caveat in order; the first hold; the prompts every guard keeps."""
    found = list(found)
    holds = [f for f in found if f.hold]
    keeps = [f.keep for f in found if f.keep is not None]
    return Finding(
        refusals=tuple(r for f in found for r in f.refusals),
        hold=holds[0].hold if holds else "",
        caveats=tuple(c for f in found for c in f.caveats),
        keep=frozenset.intersection(*keeps) if keeps else None,
        lifts=all(f.lifts for f in holds),
    )
