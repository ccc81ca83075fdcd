"""The replication rule: which records answer one question, which contradict, which are stale."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kbgen.kb import replications
from kbgen.kb.cards import MAX_LISTED, Card
from kbgen.kb.models import Record, Unknowable
from kbgen.kb.replications import evidence
from kbgen.record import verdict as verdict_module
from tests.conftest import RECORD
from tests.support import sweeps, swept
from tests.support.properties import SETTINGS
from tests.support.records import load_record

EXAMPLE = Path(__file__).parents[2] / "records"

BASE: dict[str, Any] = yaml.safe_load(RECORD)


def card(rid: str, created: str = "2026-11-01", **edits: Any) -> Card:
    """A card of RECORD as `rid`, with `edits` applied: dotted paths to values."""
    data = yaml.safe_load(RECORD)
    data["id"], data["created"] = rid, created
    data["concluded"] = created
    for path, value in edits.items():
        *parents, last = path.split("__")
        node = data
        for part in parents:
            node = node[part]
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return Card.of(Record.model_validate(data))


def verdict(
    outcome: str, low: float | None, high: float | None, effect: float = 0.0
) -> dict[str, Any]:
    cls = {"outcome": outcome, "effect": effect}
    if low is not None:
        cls |= {"ci_low": low, "ci_high": high}
    return {**BASE["verdict"], "outcome": outcome, "per_class": {"coding": cls}}


# each changes what is asked: a record with it answers another question
DIFFERENT_QUESTION = {
    "model": {"config__model": {"name": "other"}},
    "quantization": {"config__model": {"name": "tiny", "quantization": "int4"}},
    "engine": {"config__engine": {"name": "sglang", "version": "0.32.0"}},
    "cpu": {"config__hardware": {"cpu": "another cpu"}},
    "accelerator count": {
        "config__hardware": {"cpu": "test cpu", "accelerator": "H200", "count": 2}
    },
    "server args": {"config__server_args": ["--max-model-len", "4096"]},
    "variant args": {"config__variants__ngram__args": ["--max-num-seqs", "8"]},
    "speculation": {
        "config__variants__ngram__speculative_config": {
            "method": "ngram",
            "num_speculative_tokens": 3,
        }
    },
    "baseline args": {"config__variants__baseline": {"args": ["--enforce-eager"]}},
    "metric": {"hypothesis__primary_metric": "tpot_ms"},
    "direction": {"hypothesis__direction": "decrease"},
    "minimum effect": {"hypothesis__minimum_effect": 0.1},
    "concurrency": {"workload": {"prompt_suite": "s", "classes": ["coding"], "concurrency": 32}},
    "request rate": {"workload": {"prompt_suite": "s", "classes": ["coding"], "request_rate": 8.0}},
}
# each is how carefully or where it was measured, not what was asked
SAME_QUESTION = {
    "host": {"config__hardware": {"cpu": "test cpu", "host": "another-host"}},
    "engine version": {"config__engine": {"name": "vllm", "version": "0.33.0"}},
    "title": {"title": "renamed"},
    "context": {"context": "another reason"},
    "verdict": {"verdict": verdict("inconclusive", -0.5, 0.5)},
    "tags": {"tags": ["other"]},
}


@pytest.mark.parametrize("edits", DIFFERENT_QUESTION.values(), ids=DIFFERENT_QUESTION.keys())
def test_a_different_setup_is_a_different_question(edits: dict[str, Any]) -> None:
    a, b = card("a"), card("b", **edits)
    assert a.question and b.question and a.question != b.question
    assert evidence([a, b]).related("a").others == ()


@pytest.mark.parametrize("edits", SAME_QUESTION.values(), ids=SAME_QUESTION.keys())
def test_the_same_setup_is_the_same_question(edits: dict[str, Any]) -> None:
    a, b = card("a"), card("b", "2026-11-05", **edits)
    assert a.question == b.question
    assert evidence([a, b]).related("a").others == (b,)


def test_the_arms_names_are_not_part_of_the_question() -> None:
    data = yaml.safe_load(RECORD)
    data["id"] = "renamed-arms"
    data["config"]["variants"] = {"plain": {}, "spec": data["config"]["variants"]["ngram"]}
    data["config"]["baseline"] = "plain"
    data["measurements"] = {
        "plain": data["measurements"]["baseline"],
        "spec": data["measurements"]["ngram"],
    }
    data["spec_decode"] = {"spec": data["spec_decode"]["ngram"]}
    data["verdict"]["variant"] = "spec"
    assert Card.of(Record.model_validate(data)).question == card("a").question


def test_a_measured_record_started_its_requests_as_fast_as_its_concurrency_let_it() -> None:
    """kbgen bench says no rate: the same question as an import at `request_rate: inf`."""
    workload = {"prompt_suite": "s", "classes": ["coding"]}
    measured = card("a", workload=workload)
    imported = card("b", workload={**workload, "request_rate": "inf"})
    assert measured.question == imported.question
    assert card("c", workload={**workload, "request_rate": 8.0}).question != measured.question


WORKLOAD = {"prompt_suite": "s", "classes": ["coding"]}
# each field a record may say it does not know, and the record with it left empty
UNKNOWN_SETUP: dict[str, dict[str, Any]] = {
    "config.engine": {"config__engine": {"name": "unknown"}},
    "config.model": {"config__model": {"name": "unknown"}},
    "config.hardware": {"config__hardware": {}},
    "config.server_args": {},
    "config.server_env": {},
    "config.variants": {"config__variants": {"baseline": {}, "ngram": {}}},
    "workload.prompt_suite": {"workload": {**WORKLOAD, "prompt_suite": "unknown"}},
    **{
        f"workload.{name}": {"workload": WORKLOAD}
        for name in (
            "concurrency",
            "request_rate",
            "max_tokens",
            "temperature",
            "api",
            "ignore_eos",
            "usage",
        )
    },
}


@pytest.mark.parametrize("path", get_args(Unknowable))
def test_two_records_that_lack_the_same_field_are_not_one_question(path: str) -> None:
    """Alike in everything they say, and disagreeing: without the field marked unknown they
    are one question and contradict each other; marked, neither answers a question."""
    older, newer = verdict("refuted", -0.3, -0.2), verdict("supported", 0.06, 0.12)
    alike = [card("a", verdict=older, **UNKNOWN_SETUP[path])]
    alike.append(card("b", "2026-11-05", verdict=newer, **UNKNOWN_SETUP[path]))
    assert alike[0].question == alike[1].question and evidence(alike).contradictions
    unknown = [
        card(rid, day, verdict=said, unknown=[path], **UNKNOWN_SETUP[path])
        for rid, day, said in (("a", "2026-11-01", older), ("b", "2026-11-05", newer))
    ]
    assert [c.question for c in unknown] == [None, None]
    found = evidence(unknown)
    assert found.questions == {} and found.contradictions == ()
    assert found.related("a").others == ()


def test_a_record_without_a_setup_answers_no_question() -> None:
    bare = card(
        "bare", config=None, measurements={}, spec_decode={}, verdict=None, status="planned"
    )
    assert bare.question is None
    found = evidence([bare, card("a")])
    assert all(c.id != "bare" for q in found.questions.values() for c in q.cards)


@pytest.mark.parametrize(
    ("older", "newer", "why"),
    [
        (verdict("refuted", -0.3, -0.2), verdict("supported", 0.06, 0.12), "refuted vs supported"),
        (  # neither decided, but their intervals are apart: they cannot both be right
            verdict("inconclusive", -0.3, -0.01),
            verdict("inconclusive", 0.02, 0.5),
            "intervals -30.0% … -1.0% and +2.0% … +50.0% do not overlap",
        ),
        (verdict("supported", None, None), verdict("refuted", None, None), "supported vs refuted"),
    ],
)
def test_a_decisive_disagreement_is_a_contradiction(
    older: dict[str, Any], newer: dict[str, Any], why: str
) -> None:
    a = card("a", verdict=older)
    b = card("b", "2026-11-05", verdict=newer)
    (found,) = evidence([b, a]).contradictions
    assert (found.older.id, found.newer.id, found.cls, found.why) == ("a", "b", "coding", why)
    assert evidence([a, b]).related("a").contradictions == (found,)
    assert evidence([a, b]).related("b").contradictions == (found,)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        (verdict("refuted", -0.3, -0.2), verdict("refuted", -0.25, -0.1)),  # a replication
        (verdict("refuted", -0.3, -0.2), verdict("inconclusive", -0.25, 0.1)),  # overlapping
        (verdict("supported", 0.06, 0.2), verdict("inconclusive", 0.01, 0.07)),
    ],
)
def test_agreement_or_a_weaker_result_is_no_contradiction(
    older: dict[str, Any], newer: dict[str, Any]
) -> None:
    assert evidence([card("a", verdict=older), card("b", verdict=newer)]).contradictions == ()


@pytest.mark.parametrize(
    "settled",
    [{"status": "superseded"}, {"status": "running", "concluded": None, "verdict": None}],
    ids=["superseded", "not-concluded"],
)
def test_a_settled_or_unfinished_record_contradicts_nothing(settled: dict[str, Any]) -> None:
    a = card("a", **settled)
    b = card("b", "2026-11-05", verdict=verdict("supported", 0.06, 0.12))
    assert evidence([a, b]).contradictions == ()
    assert evidence([a, b]).related("b").others == (a,)  # still listed as a replication


def test_a_record_replaced_through_supersedes_contradicts_nothing() -> None:
    a = card("a")
    b = card("b", "2026-11-05", verdict=verdict("supported", 0.06, 0.12), supersedes=["a"])
    assert evidence([a, b]).contradictions == ()


def test_a_record_on_an_older_engine_version_is_stale() -> None:
    old = card("old", config__engine={"name": "vllm", "version": "0.9.2"})
    new = card("new", "2026-11-05", config__engine={"name": "vllm", "version": "0.10.0"})
    unknown = card("unknown", "2026-11-06", config__engine={"name": "vllm", "version": "nightly"})
    found = evidence([new, old, unknown])
    assert found.stale.keys() == {"old"}  # 0.9.2 < 0.10.0 as versions, not as strings
    assert found.stale["old"].newest == new
    assert found.related("old").stale == found.stale["old"]
    assert evidence([old, card("gone", **{"status": "superseded"})]).stale == {}


def test_a_page_lists_at_most_max_listed_replications_newest_first() -> None:
    cards = [card(f"r{i:03}", f"2026-11-{1 + i % 28:02}") for i in range(MAX_LISTED + 5)]
    related = evidence(cards).related(cards[0].id)
    assert len(related.others) == MAX_LISTED and related.more == 4
    dates = [c.created for c in related.others]
    assert dates == sorted(dates, reverse=True)


def test_what_a_page_shows_has_a_key_that_changes_with_it() -> None:
    a, b = card("a"), card("b", "2026-11-05")
    before = evidence([a, b]).related("a").key
    assert evidence([a, card("b", "2026-11-05", title="renamed")]).related("a").key != before
    assert evidence([a, b]).related("a").key == before
    assert replications.NOTHING.key != before


def test_the_key_tells_apart_every_part_of_what_a_page_shows() -> None:
    a, b, c = card("a"), card("b", "2026-11-05"), card("c", "2026-11-06")
    shown = [
        replications.Related("q"),
        replications.Related("q", (a,)),
        replications.Related("q", (a, b)),
        replications.Related("q", (b, a)),
        replications.Related("q", (a,), more=1),
        replications.Related("q", (), more=1),
        replications.Related("q a"),
        replications.Related("q", stale=replications.Stale(a, b)),
        replications.Related("q", stale=replications.Stale(a, c)),
    ]
    assert len({related.key for related in shown}) == len(shown)


def test_a_card_read_back_keeps_the_digest_it_was_written_with() -> None:
    """A cache stores a card's digest beside its JSON: reading it back does not serialise the
    card again (10,000 cards: half a second of every render)."""
    again = Card.from_json(card("a").to_json(), "kept")
    assert again.digest == "kept"
    assert Card.from_json(card("a").to_json()).digest == card("a").digest


def test_cards_survive_json() -> None:
    for c in (card("a"), card("b", verdict=verdict("inconclusive", None, None))):
        assert Card.from_json(c.to_json()) == c


@given(st.randoms(use_true_random=False))
@SETTINGS
def test_the_evidence_does_not_depend_on_the_order_of_the_records(rng: random.Random) -> None:
    cards = [
        card("a"),
        card("b", "2026-11-02", verdict=verdict("supported", 0.06, 0.12)),
        card("c", "2026-11-03", verdict=verdict("inconclusive", 0.2, 0.3)),
        card("d", "2026-11-04", config__engine={"name": "vllm", "version": "0.40.0"}),
        card("e", "2026-11-04", config__model={"name": "other"}),
    ]
    expected = evidence(cards)
    rng.shuffle(cards)
    assert evidence(cards) == expected


def _every_pair(cards: list[Card]) -> list[tuple[str, str, str, str]]:
    """The definition, pair by pair: what `evidence` must find however it finds it."""
    ordered = sorted(cards, key=lambda c: (c.created, c.id))
    found = []
    for i, older in enumerate(ordered):
        for newer in ordered[i + 1 :]:
            mine = {r.cls: r for r in older.results}
            for theirs in newer.results:
                ours = mine.get(theirs.cls)
                if ours is None:
                    continue
                if {ours.outcome, theirs.outcome} == {"supported", "refuted"}:
                    found.append((older.id, newer.id, theirs.cls, "outcome"))
                elif (
                    ours.interval
                    and theirs.interval
                    and (
                        ours.interval[1] < theirs.interval[0]
                        or theirs.interval[1] < ours.interval[0]
                    )
                ):
                    found.append((older.id, newer.id, theirs.cls, "intervals"))
    return found


_RESULT = st.tuples(
    st.sampled_from(["supported", "refuted", "inconclusive"]),
    st.integers(-6, 6),  # the interval's low end, in tenths
    st.integers(0, 4),  # its width
)


@given(st.lists(st.lists(_RESULT, min_size=1, max_size=2), min_size=2, max_size=9))
@SETTINGS
def test_contradictions_are_every_disagreeing_pair(
    records: list[list[tuple[str, int, int]]],
) -> None:
    cards = []
    for i, results in enumerate(records):
        per_class = {
            cls: {"outcome": o, "effect": 0.0, "ci_low": low / 10, "ci_high": (low + w) / 10}
            for cls, (o, low, w) in zip(("coding", "math"), results, strict=False)
        }
        decided = {**BASE["verdict"], "outcome": "inconclusive", "per_class": per_class}
        cards.append(card(f"r{i}", f"2026-11-{1 + i % 3:02}", verdict=decided))
    got = [
        (c.older.id, c.newer.id, c.cls, "outcome" if " vs " in c.why else "intervals")
        for c in evidence(cards).contradictions
    ]
    assert got == _every_pair(cards)


@pytest.mark.parametrize("path", sorted(EXAMPLE.glob("*.yaml")), ids=lambda path: path.name)
def test_a_card_read_back_from_a_cache_has_the_same_digest(path: Path) -> None:
    """Replication keys hash the cards' digests: a card from the render cache must give the
    digest the record's own card gives, or every page with replications renders again."""
    card = Card.of(load_record(path))
    again = Card.from_json(json.loads(json.dumps(card.to_json())))
    assert again == card and again.digest == card.digest


def test_a_superseded_record_knows_what_superseded_it() -> None:
    """Whether or not the two answer one question (a re-measurement on other hardware is
    another question), the older page names the newer ones, and its key changes with them."""
    old = card("old", "2026-11-01")
    same = card("same", "2026-11-05", supersedes=["old"])
    elsewhere = card("elsewhere", "2026-11-06", supersedes=["old"], config__model__name="other")
    alone = card("alone", "2026-11-07", config__model__name="third")
    found = evidence([old, same, elsewhere, alone])
    assert [c.id for c in found.related("old").superseded_by] == ["same", "elsewhere"]
    assert found.related("same").superseded_by == ()
    assert found.related("alone") == replications.NOTHING
    lonely = evidence([card("old", config__model__name="x"), elsewhere])  # no question shared
    assert [c.id for c in lonely.related("old").superseded_by] == ["elsewhere"]
    before = evidence([old, same]).related("old").key
    assert evidence([old, same, elsewhere]).related("old").key != before


# --- sweeps: a sweep is seen as its cells ----------------------------------------------------


def sweep_card(rid: str = "sweep", created: str = "2026-11-10", **changes: Any) -> Card:
    return Card.of(Record.model_validate(swept.sweep(rid, created, **changes)))


def a_b_card(data: dict[str, Any]) -> Card:
    return Card.of(Record.model_validate(data))


SUPPORTED = swept.cls("supported", 0.09, 0.06, 0.12)
# an A/B record beside the sweep: (its variant, concurrency, coding verdict), and what it is to
# the sweep's cell of its question (None: no cell asks it)
BESIDE_THE_SWEEP: dict[str, tuple[dict[str, Any], int, dict[str, Any], str | None]] = {
    "agrees with k5 at c1": (swept.K5, 1, swept.cls("refuted", -0.26, -0.3, -0.2), "replicates"),
    "weaker than k5 at c1": (swept.K5, 1, swept.cls("inconclusive", 0.0, -0.1, 0.1), "replicates"),
    "decides against k3 at c8": (swept.K3, 8, SUPPORTED, "supported vs refuted"),
    "apart from k3 at c1": (
        swept.K3,
        1,
        swept.cls("inconclusive", 0.04, 0.0, 0.09),
        "intervals +0.0% … +9.0% and +12.0% … +50.0% do not overlap",
    ),
    "at a load the sweep did not run": (swept.K3, 4, SUPPORTED, None),
}


@pytest.mark.parametrize(
    ("variant", "concurrency", "coding", "said"),
    BESIDE_THE_SWEEP.values(),
    ids=BESIDE_THE_SWEEP.keys(),
)
def test_an_a_b_record_is_compared_with_the_sweep_s_cell_of_its_question(
    variant: dict[str, Any], concurrency: int, coding: dict[str, Any], said: str | None
) -> None:
    a_b = a_b_card(swept.a_b("ab", "2026-11-01", variant, concurrency, coding))
    found = evidence([sweep_card(), a_b])
    cell = f"{'k5' if variant == swept.K5 else 'k3'} at concurrency {concurrency}"
    if said is None:
        assert found.related("ab").others == () and found.contradictions == ()
        return
    [seen] = found.related("ab").others
    assert (seen.id, seen.cell) == ("sweep", cell)
    assert found.related("sweep").matched == (cell,)
    if said == "replicates":
        assert found.contradictions == ()
        return
    [c] = found.contradictions
    assert (c.older.id, c.newer.id, c.newer.cell, c.cls, c.why) == (
        "ab",
        "sweep",
        cell,
        "coding",
        said,
    )
    assert c.own("sweep").cell == cell and c.other("sweep").id == "ab"
    assert c.to_json()["cells"] == [None, cell]
    assert found.related("sweep").contradictions == found.related("ab").contradictions == (c,)


def test_the_cells_of_two_sweeps_are_compared_cell_by_cell() -> None:
    """The later sweep finds k3 faster at eight streams too: that cell contradicts, the others
    replicate; each cell of one is listed with the cell of the other that asks its question."""
    cells = {**swept.CELLS, ("k3", 8): {"coding": SUPPORTED, "math": SUPPORTED}}
    first, again = sweep_card(), sweep_card("again", "2026-11-20", cells=cells)
    found = evidence([again, first])
    assert [(c.older.cell, c.newer.cell, c.cls) for c in found.contradictions] == [
        ("k3 at concurrency 8", "k3 at concurrency 8", "coding"),
        ("k3 at concurrency 8", "k3 at concurrency 8", "math"),
    ]
    related = found.related("sweep")
    assert [(o.id, o.cell) for o in related.others] == [
        ("again", "k5 at concurrency 8"),
        ("again", "k5 at concurrency 1"),
        ("again", "k3 at concurrency 8"),
        ("again", "k3 at concurrency 1"),
    ]
    assert related.matched == tuple(o.cell for o in related.others)


def test_an_a_b_record_alone_is_unchanged_beside_a_sweep_of_other_questions() -> None:
    """A sweep on another model shares no question: the A/B records compare as before."""
    elsewhere = swept.sweep()
    elsewhere["config"]["model"] = {"name": "other"}
    a, b = card("a"), card("b", "2026-11-05", verdict=verdict("supported", 0.06, 0.12))
    alone = evidence([a, b])
    beside = evidence([a, b, Card.of(Record.model_validate(elsewhere))])
    assert beside.contradictions == alone.contradictions
    assert beside.related("a") == alone.related("a")
    assert beside.related("sweep").others == ()


def test_a_sweep_s_card_holds_its_cells_and_best_and_survives_json() -> None:
    sweep = sweep_card()
    assert [(c.where, c.outcome) for c in sweep.cells] == [
        ("k3 at concurrency 1", "supported"),
        ("k5 at concurrency 1", "inconclusive"),
        ("k3 at concurrency 8", "refuted"),
        ("k5 at concurrency 8", "inconclusive"),
    ]
    assert [r.cls for r in sweep.cells[3].results] == ["coding"]  # math: no data, no effect
    assert [(b.variant, b.probability, b.ties) for b in sweep.best] == [
        ("k3", 0.97, ()),
        ("baseline", 0.61, ("k5",)),
    ]
    again = Card.from_json(json.loads(json.dumps(sweep.to_json())))
    assert again == sweep and again.digest == sweep.digest
    assert card("a").cells == () and card("a").answers() == (card("a"),)


def test_a_sweep_as_kbgen_judges_one_is_seen_as_its_cells() -> None:
    """The verdict `record.verdict.sweep` writes, in a record: a cell per variant and load, each
    its own question, and an A/B record of one of them compared with it."""
    truth = {"k3": [0.5, -0.3], "k5": [-0.1, 0.0]}
    judged = verdict_module.judge(
        sweeps.evidence(np.random.default_rng(1), truth, swept.LOADS, prompts=12),
        Record.model_validate(swept.sweep()).hypothesis,  # type: ignore[arg-type]
        [],
        resamples=999,
    )
    data = swept.sweep()
    data["config"]["baseline"] = "base"
    data["config"]["variants"] = {"base": {}, "k3": swept.K3, "k5": swept.K5}
    data["verdict"] = judged.model_dump(mode="json", exclude_none=True)
    sweep = Card.of(Record.model_validate(data))
    assert len({c.question for c in sweep.cells}) == len(sweep.cells) == 4
    k3_c1 = swept.a_b("ab", "2026-11-01", swept.K3, 1, swept.cls("refuted", -0.3, -0.4, -0.2))
    k3_c1["config"]["baseline"] = "base"
    k3_c1["config"]["variants"] = {"base": {}, "ngram": swept.K3}
    k3_c1["measurements"] = {}
    [c] = evidence([sweep, a_b_card(k3_c1)]).contradictions
    assert c.newer.cell == "k3 at concurrency 1" and c.why == "refuted vs supported"
