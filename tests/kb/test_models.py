"""The models: every field documented, the schema strict, the lifecycle enforced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from kbgen.errors import InvalidInput
from kbgen.kb import documents, models, store
from kbgen.kb.models import Plan, Record, baseline_first
from tests.conftest import RECORD


def _all_models() -> list[type[BaseModel]]:
    return [
        obj
        for obj in vars(models).values()
        if isinstance(obj, type) and issubclass(obj, models.Model) and obj is not models.Model
    ]


@pytest.mark.parametrize("model", _all_models(), ids=lambda m: m.__name__)
def test_every_field_is_documented_and_extra_keys_forbidden(model: type[BaseModel]) -> None:
    assert model.model_config.get("extra") == "forbid"
    undocumented = [name for name, f in model.model_fields.items() if not f.description]
    assert undocumented == []


def _record(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = store.plain(store.parse_text(RECORD))
    data.update(changes)
    return data


def test_planned_record_needs_little() -> None:
    record = Record.model_validate(
        {
            "schema_version": 1,
            "id": "x",
            "title": "t",
            "status": "planned",
            "created": "2026-11-29",
        }
    )
    assert record.measurements == {} and record.verdict is None


@pytest.mark.parametrize(
    ("changes", "loc"),
    [
        ({"status": "running", "hypothesis": None}, ("hypothesis",)),
        ({"provenance": None}, ("provenance",)),
        ({"concluded": None}, ("concluded",)),
        ({"config": None}, ("config",)),
    ],
    ids=[
        "running-needs-hypothesis",
        "concluded-needs-provenance",
        "concluded-needs-date",
        "concluded-needs-config",
    ],
)
def test_lifecycle_requirements_point_at_the_field(
    changes: dict[str, Any], loc: tuple[str, ...]
) -> None:
    with pytest.raises(ValidationError) as info:
        Record.model_validate(_record(**changes))
    assert [e["loc"] for e in info.value.errors()] == [loc]


STEP: dict[str, Any] = {
    "schema_version": 1,
    "id": "collect",
    "title": "the model's own answers",
    "status": "concluded",
    "created": "2026-12-03",
    "concluded": "2026-12-03",
    "step": {
        "kind": "collect-data",
        "how": "`bench/gpu/eagle3/collect.py`, temperature 0",
        "inputs": [{"name": "prompts", "path": "/tmp/eagle3/prompts.jsonl", "count": 2400}],
        "outputs": [{"name": "rows", "path": "/tmp/eagle3/rows.jsonl", "sha256": "a" * 64}],
        "figures": {"generated_tokens": 614400, "generate_s": 25.5},
        "minutes": 2.2,
    },
    "resolves": ["plan#collect-data"],
    "provenance": {"source": "measured", "tool": "bench/gpu/run.sh draft"},
}


def test_a_step_of_work_concludes_without_hypothesis_verdict_or_config() -> None:
    record = Record.model_validate(STEP)
    assert record.step is not None and record.step.outputs[0].sha256 == "a" * 64
    assert record.verdict is None and record.hypothesis is None and record.config is None
    for name, value in [("hypothesis", _record()["hypothesis"]), ("verdict", _record()["verdict"])]:
        with pytest.raises(ValidationError) as info:
            Record.model_validate({**STEP, name: value})
        assert [e["loc"] for e in info.value.errors()] == [(name,)]
        assert "a step's record has none" in str(info.value)
    for name in ("provenance", "concluded"):
        with pytest.raises(ValidationError) as info:
            Record.model_validate({**STEP, name: None})
        assert [e["loc"] for e in info.value.errors()] == [(name,)]
    with pytest.raises(ValidationError):  # a step makes something
        Record.model_validate({**STEP, "step": {**STEP["step"], "outputs": []}})
    without = {k: v for k, v in _record().items() if k not in ("verdict", "hypothesis")}
    with pytest.raises(ValidationError):  # a test without its verdict is still refused
        Record.model_validate(without)


def test_speculative_config_is_typed_by_method() -> None:
    record = Record.model_validate(_record())
    assert record.config is not None
    spec = record.config.variants["ngram"].speculative_config
    assert isinstance(spec, models.NgramConfig) and spec.prompt_lookup_max == 4
    eagle = models.Variant.model_validate(
        {
            "speculative_config": {
                "method": "eagle3",
                "model": "/m/eagle",
                "num_speculative_tokens": 3,
            }
        }
    )
    assert isinstance(eagle.speculative_config, models.DraftModelConfig)
    with pytest.raises(ValidationError, match="model"):
        models.Variant.model_validate(
            {"speculative_config": {"method": "eagle", "num_speculative_tokens": 3}}
        )


def test_ranges_are_figures() -> None:
    stats = models.SpecDecodeStats.model_validate(
        {
            "mean_acceptance_length": {"low": 1.86, "high": 2.55},
            "per_position_acceptance": [0.5, None, {"low": 0.04, "high": 0.13}],
        }
    )
    assert stats.mean_acceptance_length == models.Range(low=1.86, high=2.55)
    with pytest.raises(ValidationError, match="above high"):
        models.Range(low=3, high=2)


def test_plan_ids_and_refs() -> None:
    with pytest.raises(ValidationError, match="at least 1 item"):
        Plan.model_validate({"schema_version": 1, "id": "p", "title": "t", "tasks": []})
    with pytest.raises(ValidationError, match="pattern"):
        Record.model_validate(_record(resolves=["Plan#Task"]))


def test_json_schemas() -> None:
    schemas = models.json_schemas()
    assert set(schemas) == {"record.schema", "plan.schema"}
    assert schemas["record.schema"]["additionalProperties"] is False


def test_the_baseline_comes_first_then_the_others_in_order() -> None:
    assert baseline_first("b", ["a", "b", "c"]) == ["b", "a", "c"]


BASE = "measurements.baseline.coding.decode_tok_s"
WORKLOAD = "tags: [ngram]\nworkload: {prompt_suite: s, classes: "


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("mean: 62.6", "mean: .nan", f"{BASE}.mean", "finite"),
        ("mean: 46.4", "mean: -.inf", "measurements.ngram.coding.decode_tok_s.mean", "finite"),
        ("mean: 62.6", "mean: 1e400", f"{BASE}.mean", "finite"),
        ("mean: 62.6", "mean: true", f"{BASE}.mean", "valid number"),
        ("n: 10,", "n: true,", f"{BASE}.n", "valid integer"),
        ("n: 10,", "n: '10',", f"{BASE}.n", "valid integer"),
        ("n: 10,", "n: 1e1,", f"{BASE}.n", "valid integer"),
        ("drafts: 100", "drafts: 99999999999999999999", "spec_decode.ngram.drafts", "64 bits"),
        ("drafts: 100", "drafts: -1", "spec_decode.ngram.drafts", "greater than or equal to 0"),
        ("effect: -0.26", "effect: .nan", "verdict.per_class.coding.effect", "finite"),
        ("confidence: 0.95", "confidence: .inf", "verdict.confidence", "finite"),
        ("minimum_effect: 0.05", "minimum_effect: no", "hypothesis.minimum_effect", "number"),
        (
            "[0.5, 0.3, 0.1, 0.05, 0.01]",
            "[0.5, .nan]",
            "spec_decode.ngram.per_position_acceptance[1]",
            "finite",
        ),
        ("tags: [ngram]", WORKLOAD + "[a, a]}", "workload.classes[1]", "'a' appears twice"),
        ("tags: [ngram]", WORKLOAD + "[a], repeats: true}", "workload.repeats", "valid integer"),
    ],
)
def test_numbers_are_finite_and_typed(
    tmp_path: Path, old: str, new: str, field: str, message: str
) -> None:
    assert old in RECORD
    path = tmp_path / "ngram-test.yaml"
    path.write_text(RECORD.replace(old, new, 1))
    with pytest.raises(InvalidInput) as info:
        documents.load_file(path)
    [problem] = info.value.problems
    assert problem.field == field and message in problem.message, problem
    text = path.read_text()
    assert problem.line == text[: text.index(new.split("\n")[-1])].count("\n") + 1


INCREASE = "direction: increase\n  minimum_effect: 0.05"
TO_TEN = "is out of range: the minimum effect is from 0 to 1000% (a fraction, 0.05, or a"
BELOW_ONE = "is out of range: a decrease's minimum effect is from 0 to below 100% (a fraction"
PERCENT = "would read as"


@pytest.mark.parametrize(
    ("hypothesis", "message"),
    [
        ("direction: increase\n  minimum_effect: 20", f"20 {PERCENT} 2000%"),
        ("direction: increase\n  minimum_effect: 5", f"5 {PERCENT} 500%: write a fraction"),
        ("direction: increase\n  minimum_effect: 1", f"1 {PERCENT} 100%"),
        ("direction: increase\n  minimum_effect: 1050%", f"1050% {TO_TEN}"),
        ("direction: increase\n  minimum_effect: -0.05", f"-5% {TO_TEN}"),
        ("direction: decrease\n  minimum_effect: 100%", f"100% {BELOW_ONE}"),
        ("direction: decrease\n  minimum_effect: 5", f"5 {PERCENT} 500%"),
        ("direction: decrease\n  minimum_effect: -1", f"-100% {BELOW_ONE}"),
        ("direction: sideways\n  minimum_effect: 2000%", f"2000% {TO_TEN}"),
    ],
)
def test_a_minimum_effect_out_of_range_is_located_and_says_the_range(
    tmp_path: Path, hypothesis: str, message: str
) -> None:
    """At `hypothesis.minimum_effect`'s own line, with the range the direction allows."""
    path = tmp_path / "ngram-test.yaml"
    path.write_text(RECORD.replace(INCREASE, hypothesis))
    with pytest.raises(InvalidInput) as info:
        documents.load_file(path)
    [problem] = [p for p in info.value.problems if p.field == "hypothesis.minimum_effect"]
    assert problem.line is not None
    assert path.read_text().splitlines()[problem.line - 1].startswith("  minimum_effect: ")
    assert problem.message.startswith(message), problem


@pytest.mark.parametrize(
    ("direction", "written", "effect"),
    [
        ("increase", 0, 0),
        ("increase", "1000%", 10),
        ("decrease", 0.99, 0.99),
        ("increase", "5%", 0.05),
        ("increase", "300%", 3),
    ],
)
def test_a_minimum_effect_at_the_ends_of_its_range_is_valid(
    direction: str, written: float | str, effect: float
) -> None:
    hypothesis = {"direction": direction, "minimum_effect": written}
    record = Record.model_validate(_record(hypothesis={**_record()["hypothesis"], **hypothesis}))
    assert record.hypothesis is not None
    assert record.hypothesis.minimum_effect == pytest.approx(effect)


def test_a_minimum_effect_of_100_percent_or_more_is_written_as_it_must_be_read() -> None:
    """A record kbgen writes loads again: 3 (read from '300%') is written as '300%'."""
    hypothesis = {**_record()["hypothesis"], "minimum_effect": "300%"}
    record = Record.model_validate(_record(hypothesis=hypothesis))
    dumped = record.model_dump(mode="json")
    assert dumped["hypothesis"]["minimum_effect"] == "300%"
    assert Record.model_validate(dumped) == record


def test_an_interval_past_the_largest_float_is_unknown() -> None:
    stats = models.MetricStats(n=1, mean=1e308, stdev=1e308)
    assert stats.interval() is None
    assert models.MetricStats(n=4, mean=10.0, stdev=2.0).interval() == pytest.approx((8.04, 11.96))


SPECULATIVE = [models.NgramConfig, models.SuffixConfig, models.DraftModelConfig, models.MtpConfig]


@pytest.mark.parametrize("model", SPECULATIVE, ids=lambda m: m.__name__)
def test_speculative_configs_are_documented_and_keep_unknown_keys(model: type[BaseModel]) -> None:
    assert model.model_config.get("extra") == "allow"
    assert [name for name, f in model.model_fields.items() if not f.description] == []


@pytest.mark.parametrize(
    ("config", "kind"),
    [
        ({"method": "ngram_gpu", "num_speculative_tokens": 3}, models.NgramConfig),
        ({"method": "suffix"}, models.SuffixConfig),
        (
            {"method": "medusa", "model": "/m/medusa", "num_speculative_tokens": 2},
            models.DraftModelConfig,
        ),
        (
            {"method": "mlp_speculator", "model": "/m/s", "num_speculative_tokens": 2},
            models.DraftModelConfig,
        ),
        (
            {"method": "draft_model", "model": "/m/d", "num_speculative_tokens": 3},
            models.DraftModelConfig,
        ),
        ({"method": "mtp", "num_speculative_tokens": 1}, models.MtpConfig),
    ],
    ids=lambda x: x["method"] if isinstance(x, dict) else "",
)
def test_every_speculative_method_of_vllm_is_typed(
    config: dict[str, Any], kind: type[BaseModel]
) -> None:
    variant = models.Variant.model_validate({"speculative_config": config})
    assert isinstance(variant.speculative_config, kind)


def test_unknown_speculative_keys_are_kept_and_passed_on() -> None:
    config = {
        "method": "eagle3",
        "model": "/m/e",
        "num_speculative_tokens": 3,
        "rejection_sample_method": "block",
        "draft_load_config": {"load_format": "dummy"},
    }
    variant = models.Variant.model_validate({"speculative_config": config})
    assert variant.speculative_config is not None
    assert variant.speculative_config.model_dump(exclude_none=True) == config
    with pytest.raises(ValidationError, match="finite number"):
        models.Variant.model_validate(
            {"speculative_config": {**config, "synthetic_acceptance_length": float("nan")}}
        )


def test_a_speculative_config_in_the_arguments_becomes_the_typed_field() -> None:
    json_text = '{"method": "ngram_gpu", "num_speculative_tokens": 5, "prompt_lookup_max": 4}'
    variant = models.Variant.model_validate(
        {"args": ["--max-num-seqs", "8", "--speculative-config", json_text]}
    )
    assert variant.args == ["--max-num-seqs", "8"]
    assert isinstance(variant.speculative_config, models.NgramConfig)
    assert variant.speculative_config.prompt_lookup_max == 4
    # read again as a record keeps it: the same arm
    again = models.Variant.model_validate(variant.model_dump(exclude_none=True))
    assert again == variant


@pytest.mark.parametrize(
    ("variant", "loc", "message"),
    [
        (
            {"args": ["--dtype", "half", "-sc", '{"method": "ngram"}']},
            ("args", 2),
            "speculative config: num_speculative_tokens: Field required",
        ),
        (
            {"args": ["-sc", '{"num_speculative_tokens": 3}']},
            ("args", 0),
            "speculative config: method: required field is missing",
        ),
        (
            {
                "args": ["--spec-method", "ngram", "--spec-tokens", "2"],
                "speculative_config": {"method": "ngram", "num_speculative_tokens": 2},
            },
            ("args", 0),
            "a speculative config is also given here",
        ),
        ({"args": ["-sc", "{"]}, ("args", 0), "-sc: not JSON"),
    ],
    ids=["field", "method", "twice", "json"],
)
def test_a_speculative_config_in_the_arguments_is_checked_at_its_argument(
    variant: dict[str, Any], loc: tuple[str | int, ...], message: str
) -> None:
    with pytest.raises(ValidationError) as info:
        models.Variant.model_validate(variant)
    [error] = info.value.errors()
    assert error["loc"] == loc and error["msg"].startswith(message)


@pytest.mark.parametrize(
    ("name", "valid"),
    [("ngram_gpu", True), ("eagle3-k4_tp2", True), ("_x", False), ("x_", False), ("X", False)],
)
def test_variant_names_may_hold_underscores(name: str, valid: bool) -> None:
    data = _record()
    variants = data["config"]["variants"]
    variants[name] = variants.pop("ngram")
    data["measurements"][name] = data["measurements"].pop("ngram")
    data["spec_decode"][name] = data["spec_decode"].pop("ngram")
    data["verdict"]["variant"] = name
    data["startup_s"] = {"baseline": [80.0], name: [90.0]}  # every section a variant keys
    data["effective"] = {"baseline": {}, name: {"behaviour": {"model_runner": "V1"}}}
    if valid:
        record = Record.model_validate(data)
        assert name in record.spec_decode and name in record.startup_s and name in record.effective
    else:
        with pytest.raises(ValidationError, match="pattern"):
            Record.model_validate(data)


SHA = "ab" * 20


@pytest.mark.parametrize(
    ("model", "data", "match"),
    [
        (models.KbgenBuild, {"version": "0.1.0", "commit": SHA}, r"commit_from\n.*set with"),
        (
            models.KbgenBuild,
            {"version": "0.1.0", "commit_from": "checkout"},
            r"commit_from\n.*set with the commit, and only with it",
        ),
        (
            models.KbgenBuild,
            {"version": "0.1.0", "commit": SHA, "commit_from": "direct_url", "changed": False},
            r"changed\n.*only a checkout has changes",
        ),
        (
            models.Provenance,
            {
                "source": "measured",
                "kbgen": {"version": "0.1.0", "commit": SHA, "commit_from": "checkout"},
                "git_sha": "cd" * 20,
                "spec_in_kbgen_checkout": True,
            },
            r"spec_in_kbgen_checkout\n.*one checkout has one commit",
        ),
        (
            models.Provenance,
            {"source": "measured", "git_sha": SHA, "spec_in_kbgen_checkout": True},
            r"one checkout has one commit",
        ),
    ],
    ids=["commit-without-where", "where-without-commit", "changes-not-a-checkout", "two", "one"],
)
def test_kbgen_s_commit_and_the_spec_s_are_never_confused(
    model: type[BaseModel], data: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValidationError, match=match):
        model.model_validate(data)


def _verdict(**changes: Any) -> models.Verdict:
    per_class = {
        "coding": {"outcome": "supported", "effect": 0.45},
        "math": {"outcome": "inconclusive", "effect": 0.3},
    }
    data = {"outcome": "inconclusive", "variant": "ngram", "method": "bootstrap", "rule": "r"}
    return models.Verdict.model_validate({**data, "per_class": per_class, **changes})


@pytest.mark.parametrize(
    ("changes", "limits"),
    [
        ({}, []),
        (  # the whole comparison's first, then each class's in per_class order, its name off
            {
                "caveats": [
                    "math: an arm drifted 9.0% across rounds",
                    "the servers ran differently: async_scheduling",
                    "coding: the arms generated different outputs for 2 of 10 prompts",
                    "ngram: no /metrics window",  # a variant's, not a class's
                ]
            },
            [
                (
                    None,
                    ["the servers ran differently: async_scheduling", "ngram: no /metrics window"],
                ),
                ("coding", ["the arms generated different outputs for 2 of 10 prompts"]),
                ("math", ["an arm drifted 9.0% across rounds"]),
            ],
        ),
        (  # reasons and a class's reason first, each said once though the caveats repeat them
            {
                "reasons": ["coding: no usable decode_tok_s in ngram", "a token mismatch"],
                "caveats": ["a token mismatch", "math: drift could change it", "math: drifted"],
                "per_class": {
                    "coding": {"outcome": "supported", "effect": 0.45},
                    "math": {
                        "outcome": "inconclusive",
                        "effect": 0.3,
                        "reason": "drift could change it",
                    },
                },
            },
            [
                (None, ["a token mismatch"]),
                ("coding", ["no usable decode_tok_s in ngram"]),
                ("math", ["drift could change it", "drifted"]),
            ],
        ),
        (  # a class's reason stated nowhere else (a hand-written record)
            {
                "per_class": {
                    "coding": {"outcome": "inconclusive", "effect": 0.1, "reason": "3 prompts"}
                }
            },
            [("coding", ["3 prompts"])],
        ),
    ],
    ids=["nothing", "grouped", "once-each", "reason-only"],
)
def test_what_limits_a_verdict_is_grouped_by_class(
    changes: dict[str, Any], limits: list[tuple[str | None, list[str]]]
) -> None:
    assert _verdict(**changes).limits() == limits


UNKNOWN_WORKLOAD = {"prompt_suite": "unknown", "classes": ["all"]}


@pytest.mark.parametrize(
    ("changes", "unknown"),
    [
        ({"config": {**_record()["config"], "hardware": {}}}, ["config.hardware"]),
        ({"workload": UNKNOWN_WORKLOAD}, ["workload.prompt_suite", "workload.temperature"]),
        ({"config": {**_record()["config"], "engine": {"name": "unknown"}}}, ["config.engine"]),
        ({}, ["config.server_args", "config.server_env"]),  # unset: empty
    ],
    ids=["hardware", "workload", "engine", "unset-lists"],
)
def test_a_field_left_empty_may_be_unknown(changes: dict[str, Any], unknown: list[str]) -> None:
    assert Record.model_validate(_record(**changes, unknown=unknown)).unknown == unknown


@pytest.mark.parametrize(
    ("changes", "unknown", "message"),
    [
        ({}, ["config.hardware"], "config.hardware is set: a field that is known is not unknown"),
        (
            {"workload": {**UNKNOWN_WORKLOAD, "temperature": 0.0}},
            ["workload.temperature"],
            "workload.temperature is set",
        ),
        ({}, ["config.model"], "config.model is set"),  # a name that is not `unknown`
        ({}, ["workload.concurrency"], "the record has no workload"),
        (
            {"config": {**_record()["config"], "hardware": {}}},
            ["config.hardware", "config.hardware"],
            "'config.hardware' appears twice",
        ),
    ],
    ids=["hardware-set", "temperature-set", "model-named", "no-workload", "twice"],
)
def test_a_known_field_is_not_unknown(
    changes: dict[str, Any], unknown: list[str], message: str
) -> None:
    with pytest.raises(ValidationError) as info:
        Record.model_validate(_record(**changes, unknown=unknown))
    [error] = info.value.errors()
    assert error["loc"][0] == "unknown" and message in error["msg"]


def test_only_the_setup_a_question_reads_may_be_unknown() -> None:
    with pytest.raises(ValidationError, match=r"unknown\.0"):
        Record.model_validate(_record(unknown=["config.hardware.cpu"]))


@pytest.mark.parametrize(
    ("load", "message"),
    [
        ({"concurrency": 8}, None),
        ({"request_rate": "inf", "concurrency": 4}, None),
        ({"request_rate": 14.29}, None),
        ({"sweep_step": 2}, None),
        ({"streams": 8}, "Extra inputs are not permitted"),
        ({"concurrency": 0}, "greater than or equal to 1"),
        ({"concurrency": 2.0}, "valid integer"),
        ({"request_rate": 0.0}, "greater than 0"),
        ({"request_rate": "fast"}, "'inf'"),
        ({"sweep_step": -1}, "greater than or equal to 0"),
    ],
    ids=[
        "concurrency",
        "rate-inf",
        "rate",
        "sweep-step",
        "unknown-key",
        "no-concurrency",
        "concurrency-float",
        "zero-rate",
        "rate-text",
        "negative-step",
    ],
)
def test_a_load_level_is_validated_key_by_key(load: dict[str, Any], message: str | None) -> None:
    workload = {"prompt_suite": "p.jsonl", "classes": ["all"], "loads": [load]}
    if message is None:
        assert models.Workload.model_validate(workload).loads == [load]
    else:
        with pytest.raises(ValidationError, match=message):
            models.Workload.model_validate(workload)
