"""The question rule as data: its parts name real fields, and its key is stable; question
labels: two questions that share a label are told apart in words, never a digest."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kbgen.kb import questions
from kbgen.kb.cards import Card
from kbgen.kb.documents import load_model
from kbgen.kb.models import Record
from kbgen.kb.replications import evidence
from tests.conftest import REPO
from tests.kb.test_replications import card
from tests.support import swept

DIGEST = re.compile(r"\b[0-9a-f]{16}\b")
LABEL = "ngram vs baseline · tiny · test cpu · vllm"
WORKLOAD = {"prompt_suite": "s", "classes": ["coding"]}

# (edits to the record, what its label says, what the unedited record's label says): each
# edit asks another question under the same label
TOLD_APART: dict[str, tuple[dict[str, Any], str, str]] = {
    "server args": (
        {"config__server_args": ["--max-model-len", "4096"]},
        "with --max-model-len 4096",
        "without --max-model-len 4096",
    ),
    "vllm environment": (
        {"config__server_env": {"VLLM_USE_V2_MODEL_RUNNER": "0", "HOME": "/root"}},
        "with VLLM_USE_V2_MODEL_RUNNER=0",
        "without VLLM_USE_V2_MODEL_RUNNER=0",
    ),
    "quantization": (
        {"config__model": {"name": "tiny", "quantization": "int4"}},
        "quantization int4",
        "quantization unset",
    ),
    "interconnect": (
        {"config__hardware": {"cpu": "test cpu", "interconnect": "PCIe"}},
        "interconnect PCIe",
        "interconnect unset",
    ),
    "variant args": (
        {"config__variants__ngram__args": ["--max-num-seqs", "8"]},
        "variant.args --max-num-seqs 8",
        "variant.args --max-num-seqs 4",
    ),
    "speculation": (
        {
            "config__variants__ngram__speculative_config": {
                "method": "ngram",
                "num_speculative_tokens": 3,
            }
        },
        "variant.speculative_config.num_speculative_tokens 3 · "
        "variant.speculative_config.prompt_lookup_max unset · "
        "variant.speculative_config.prompt_lookup_min unset",
        "variant.speculative_config.num_speculative_tokens 5 · "
        "variant.speculative_config.prompt_lookup_max 4 · "
        "variant.speculative_config.prompt_lookup_min 2",
    ),
    "baseline args": (
        {"config__variants__baseline": {"args": ["--enforce-eager"]}},
        "baseline.args --enforce-eager",
        "baseline.args none",
    ),
    "metric": (
        {"hypothesis__primary_metric": "tpot_ms"},
        "primary_metric tpot_ms",
        "primary_metric decode_tok_s",
    ),
    "direction": (
        {"hypothesis__direction": "decrease"},
        "direction decrease",
        "direction increase",
    ),
    "minimum effect": (
        {"hypothesis__minimum_effect": 0.1},
        "minimum_effect 0.1",
        "minimum_effect 0.05",
    ),
    "max tokens": (
        {"workload": {**WORKLOAD, "max_tokens": 512}},
        "max_tokens 512",
        "max_tokens unset",
    ),
    "temperature": (
        {"workload": {**WORKLOAD, "temperature": 0.7}},
        "temperature 0.7",
        "temperature unset",
    ),
    "ignore eos": (
        {"workload": {**WORKLOAD, "ignore_eos": True}},
        "ignore_eos true",
        "ignore_eos unset",
    ),
}


@pytest.mark.parametrize("part", questions.ASKED, ids=lambda part: part.key)
def test_every_field_a_part_names_is_a_field_of_its_model(part: questions.Part) -> None:
    """`model_dump(include=...)` ignores a name that is no field: the rule would state it."""
    assert set(part.fields) <= set(part.of.model_fields)


def test_what_is_not_asked_is_the_rest_of_the_workload() -> None:
    [workload] = [part for part in questions.ASKED if part.key == "workload"]
    assert {*workload.fields, *questions.NOT_ASKED} == set(workload.of.model_fields)
    assert not set(workload.fields) & set(questions.NOT_ASKED)


@pytest.mark.parametrize(
    ("record", "key"),
    [
        ("2026-11-29-ngram-spec-decode-kimi-k2-5", "67c935b33a7a39af"),
        ("2026-11-29-ngram-vs-baseline", "601aafd165a51c4c"),
        ("2026-12-01-ngram-vs-baseline-h200-c1-pinned", "433aeb29b8f6b3b2"),
    ],
)
def test_the_key_changes_only_with_the_rule_s_number(record: str, key: str) -> None:
    """Cached cards are keyed by `RULE`: a change to what is hashed must bump it (and these)."""
    found = questions.question_of(load_model(REPO / "records" / f"{record}.yaml", Record))
    assert found is not None and (questions.RULE, found[0]) == (6, key)


def _labels(cards: list[Card]) -> dict[str, str]:
    """Each record's question's label, by record id."""
    return {c.id: q.label for q in evidence(cards).questions.values() for c in q.cards}


@pytest.mark.parametrize(("edits", "edited", "plain"), TOLD_APART.values(), ids=TOLD_APART.keys())
def test_two_questions_of_one_label_are_told_apart_in_words(
    edits: dict[str, Any], edited: str, plain: str
) -> None:
    a, b = card("a", workload=WORKLOAD), card("b", **{"workload": WORKLOAD, **edits})
    assert a.question_label == b.question_label == LABEL
    labels = _labels([a, b])
    assert (labels["a"], labels["b"]) == (f"{LABEL} · {plain}", f"{LABEL} · {edited}")


def test_only_what_differs_is_said_and_every_label_is_its_own() -> None:
    """Three questions of one label: each says the facets not all of them share, and no two
    say the same."""
    cards = [
        card("a"),
        card("b", config__server_args=["--enforce-eager"]),
        card("c", config__server_args=["--enforce-eager"], hypothesis__minimum_effect=0.1),
    ]
    assert _labels(cards) == {
        "a": f"{LABEL} · without --enforce-eager · minimum_effect 0.05",
        "b": f"{LABEL} · with --enforce-eager · minimum_effect 0.05",
        "c": f"{LABEL} · with --enforce-eager · minimum_effect 0.1",
    }


def test_a_label_that_is_no_one_else_s_is_left_as_it_is() -> None:
    a, b = card("a"), card("b", config__model={"name": "other"})
    assert {q.label for q in evidence([a, b]).questions.values()} == {
        LABEL,
        "ngram vs baseline · other · test cpu · vllm",
    }


@pytest.mark.parametrize(
    ("facets", "said"),
    [
        (  # the same words in another order
            {"x": (("settings", "--a 1 --b 2"),), "y": (("settings", "--a 2 --b 1"),)},
            {"x": "settings --a 1 --b 2", "y": "settings --a 2 --b 1"},
        ),
        (  # nothing to tell them apart by: the newest record of each
            {"x": (("api", "chat"),), "y": (("api", "chat"),)},
            {"x": "as in rec-x", "y": "as in rec-y"},
        ),
        (
            {"x": (("api", "chat"),), "y": (("api", "chat"),), "z": (("api", "completions"),)},
            {"x": "api chat · as in rec-x", "y": "api chat · as in rec-y", "z": "api completions"},
        ),
    ],
)
def test_what_facets_cannot_tell_apart_is_told_by_the_newest_record(
    facets: dict[str, questions.Facets], said: dict[str, str]
) -> None:
    assert questions.tell_apart(facets, {key: f"rec-{key}" for key in facets}) == said


def test_no_label_carries_a_digest() -> None:
    cards = [
        card(f"r{i}", **{"workload": WORKLOAD, **edits})
        for i, (edits, _, _) in enumerate(TOLD_APART.values())
    ]
    labels = [q.label for q in evidence([card("a", workload=WORKLOAD), *cards]).questions.values()]
    assert len(set(labels)) == len(labels) == len(cards) + 1
    assert not [label for label in labels if DIGEST.search(label)]


# a sweep's cell (variant at load) and A/B records (the variant's settings, the concurrency):
# whether the two ask one question
SWEEP = swept.sweep()
CELL_AND_A_B: dict[str, tuple[str, int, dict[str, Any], int, bool]] = {
    "the same settings and load": ("k5", 1, swept.K5, 1, True),
    "another load": ("k5", 1, swept.K5, 8, False),
    "another variant's settings": ("k3", 1, swept.K5, 1, False),
    "a load the sweep did not run": ("k3", 8, swept.K3, 4, False),
    "k3 at eight streams": ("k3", 8, swept.K3, 8, True),
}


@pytest.mark.parametrize(
    ("variant", "concurrency", "settings", "at", "same"),
    CELL_AND_A_B.values(),
    ids=CELL_AND_A_B.keys(),
)
def test_a_sweep_s_cell_asks_the_question_of_an_a_b_record_of_its_settings_and_load(
    variant: str, concurrency: int, settings: dict[str, Any], at: int, same: bool
) -> None:
    """A cell is its variant's settings at its load level: the level's concurrency read as the
    workload's, the variant's name not asked."""
    asked = questions.question_of(
        Record.model_validate(SWEEP), variant, {"concurrency": concurrency}
    )
    a_b = questions.question_of(
        Record.model_validate(
            swept.a_b("ab", "2026-11-01", settings, at, swept.CELLS[("k5", 1)]["coding"])
        )
    )
    assert asked is not None and a_b is not None
    assert (asked[0] == a_b[0]) is same
    assert asked[1].endswith(f"vllm · concurrency {concurrency}")


def test_a_sweep_s_own_question_is_its_headline_cell_s() -> None:
    record = Record.model_validate(SWEEP)
    headline = questions.question_of(record, "k3", {"concurrency": 1})
    assert headline is not None and questions.question_of(record) == headline
    assert Card.of(record).question == headline[0]


def test_a_load_of_output_length_is_the_workload_s_max_tokens() -> None:
    sweep = swept.sweep()
    sweep["workload"]["loads"] = [{"max_tokens": 128}, {"max_tokens": 256}]
    for cell in sweep["verdict"]["cells"]:
        cell["load"] = {"max_tokens": 128 if cell["load"]["concurrency"] == 1 else 256}
    sweep["verdict"]["load"] = {"max_tokens": 128}
    for best in sweep["verdict"]["best"]:
        best["load"] = {"max_tokens": 128 if best["load"]["concurrency"] == 1 else 256}
    a_b = swept.a_b("ab", "2026-11-01", swept.K3, 1, swept.CELLS[("k3", 8)]["coding"])
    del a_b["workload"]["concurrency"]
    a_b["workload"]["max_tokens"] = 256
    cells = {c.where: c.question for c in Card.of(Record.model_validate(sweep)).cells}
    assert cells["k3 at max_tokens 256"] == Card.of(Record.model_validate(a_b)).question
    assert cells["k3 at max_tokens 128"] != cells["k3 at max_tokens 256"]


def test_a_group_of_fields_a_record_lacks_whole_is_said_once() -> None:
    """A trace's five fields against a record that replays none: `trace unset`, once; a group the
    record has part of keeps its fields' own words."""
    trace = (("trace.speedup", "4"), ("trace.start_s", "0"), ("api", "completions"))
    suite = (("api", "chat"), ("prompt_suite", "seed.jsonl"))
    partly = (("trace.speedup", "2"), ("api", "chat"))
    said = questions.tell_apart({"t": trace, "s": suite, "p": partly}, {})
    assert said["s"] == "api chat · prompt_suite seed.jsonl · trace unset"
    assert said["t"] == "api completions · prompt_suite unset · trace.speedup 4 · trace.start_s 0"
    assert said["p"] == "api chat · prompt_suite unset · trace.speedup 2 · trace.start_s unset"
