"""Experiment specs: the repository's own loads; mistakes are located like a record's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbgen.errors import InvalidInput
from kbgen.kb.models import Variant
from kbgen.run import spec
from tests.conftest import REPO

DEMO = REPO / "bench" / "experiments" / "ngram-vs-baseline.yaml"


def test_the_demo_spec_loads() -> None:
    experiment = spec.load(DEMO)
    assert experiment.baseline == "baseline" and set(experiment.variants) == {"baseline", "ngram"}
    assert isinstance(experiment.server, spec.ProcessServer)
    assert experiment.workload.classes == ["coding", "math", "explanatory"]
    assert experiment.workload.client_processes == "auto"  # one process up to 128 streams
    assert experiment.workload.usage == "continuous"  # usage on every chunk unless asked


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        (
            "launcher: process",
            "launcher: docker",
            "server.launcher",
            "does not match any of the expected",
        ),
        ("baseline: baseline", "baseline: control", "baseline", "'control' is not a variant"),
        ("  repeats: 1", "  repeets: 1", "workload.repeets", "unknown field"),
        ("  concurrency: 1", "  concurrency: 0", "workload.concurrency", "greater than or equal"),
        ("  port: 8011", "  port: 99999", "server.port", "less than or equal to 65535"),
        (
            "  concurrency: 1",
            "  client_processes: 0\n  concurrency: 1",
            "workload.client_processes",
            "greater than or equal to 1; or Input should be 'auto'",
        ),
        (
            "  concurrency: 1",
            "  client_processes: many\n  concurrency: 1",
            "workload.client_processes",
            "valid integer; or Input should be 'auto'",
        ),
        (
            "  concurrency: 1",
            "  usage: every-chunk\n  concurrency: 1",
            "workload.usage",
            "Input should be 'continuous' or 'final'",
        ),
        (
            "      num_speculative_tokens: 5",
            "      num_speculative_tokens: five",
            "variants.ngram.speculative_config.num_speculative_tokens",
            "valid integer",
        ),
        (
            "  minimum_effect: 0.05",
            "  minimum_effect: 50",
            "hypothesis.minimum_effect",
            "50 would read as 5000%: write a fraction (0.05) or a percentage ('5%')",
        ),
        (
            "baseline: baseline",
            "hardware: {accelerator: NVIDIA H200, host: lab-1}\nbaseline: baseline",
            "hardware.host",
            "the machine's label is host_label",
        ),
    ],
    ids=[
        "launcher",
        "baseline",
        "typo",
        "concurrency",
        "port",
        "client-processes-0",
        "client-processes-word",
        "usage",
        "spec-tokens",
        "minimum-effect",
        "hardware-host",
    ],
)
def test_spec_mistakes_are_located(
    tmp_path: Path, old: str, new: str, field: str, message: str
) -> None:
    text = DEMO.read_text()
    assert old in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(InvalidInput) as info:
        spec.load(bad)
    problems = [p for p in info.value.problems if p.field == field]
    assert problems and message in problems[0].message, info.value.problems
    line = text.replace(old, new, 1)[: text.replace(old, new, 1).index(new)].count("\n") + 1
    assert problems[0].line == line


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("javascript:alert(1)", "should be an http:// or https:// URL with a host"),
        ("", "should be an http:// or https:// URL with a host"),
        ("http://", "should be an http:// or https:// URL with a host"),
        ("http://127.0.0.1:99999", "not a URL: Port out of range"),
        ("http://127.0.0.1:abc", "not a URL: Port could not be cast"),
        ("${VLLM_URL}", None),  # checked once filled in
    ],
    ids=["scheme", "empty", "no-host", "port-out-of-range", "port-not-a-number", "reference"],
)
def test_a_server_url_is_an_http_url(tmp_path: Path, url: str, message: str | None) -> None:
    text = DEMO.read_text()
    start, end = text.index("server:\n"), text.index("\nbaseline:")
    server = f"server:\n  launcher: external\n  url: {json.dumps(url)}"
    bad = tmp_path / "bad.yaml"
    bad.write_text(text[:start] + server + text[end:])
    if message is None:
        assert spec.load(bad).server.url == url
        return
    with pytest.raises(InvalidInput) as info:
        spec.load(bad)
    [problem] = info.value.problems
    assert (problem.field, problem.line) == ("server.url", text[:start].count("\n") + 3)
    assert problem.message.startswith(message)


def test_server_args_of_a_variant() -> None:
    assert spec.server_args(Variant()) == []
    eagle = Variant.model_validate(
        {
            "args": ["--max-num-seqs", "8"],
            "speculative_config": {
                "method": "eagle3",
                "model": "/m/eagle3",
                "num_speculative_tokens": 3,
            },
        }
    )
    args = spec.server_args(eagle)
    assert args[:3] == ["--max-num-seqs", "8", "--speculative-config"]
    assert json.loads(args[3]) == {
        "method": "eagle3",
        "model": "/m/eagle3",
        "num_speculative_tokens": 3,
    }


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("  repeats: 1", "  repeats: true", "workload.repeats", "valid integer"),
        ("  temperature: 0", "  temperature: .inf", "workload.temperature", "finite number"),
        ("  temperature: 0", "  temperature: .nan", "workload.temperature", "finite number"),
        ("  ignore_eos: true", "  ignore_eos: 1", "workload.ignore_eos", "valid boolean"),
        ("  concurrency: 1", '  concurrency: "4"', "workload.concurrency", "valid integer"),
        (
            "  concurrency: 1",
            "  concurrency: 1000000000",
            "workload.concurrency",
            f"less than or equal to {spec.MAX_CONCURRENCY}",
        ),
        ("  repeats: 1", "  repeats: 1000000", "workload.repeats", "less than or equal"),
        ("  max_tokens: 48", "  max_tokens: 1e9", "workload.max_tokens", "valid integer"),
        ("  seed: 0", "  seed: 99999999999999999999", "workload.seed", "fit in 64 bits"),
        ("  startup_timeout_s: 900", "  startup_timeout_s: 1e300", "server.startup_timeout_s", ""),
        (
            "  classes: [coding, math, explanatory]",
            "  classes: [coding, math, coding]",
            "workload.classes[2]",
            "'coding' appears twice",
        ),
    ],
    ids=[
        "repeats-bool",
        "temperature-inf",
        "temperature-nan",
        "ignore-eos-int",
        "concurrency-string",
        "concurrency-huge",
        "repeats-huge",
        "max-tokens-float",
        "seed-past-64-bits",
        "timeout-huge",
        "class-twice",
    ],
)
def test_numbers_are_typed_finite_and_bounded(
    tmp_path: Path, old: str, new: str, field: str, message: str
) -> None:
    test_spec_mistakes_are_located(tmp_path, old, new, field, message)


@pytest.mark.parametrize(
    "path", sorted((REPO / "bench").rglob("*.yaml")), ids=lambda p: str(p.relative_to(REPO))
)
def test_every_spec_kbgen_ships_loads_and_resolves_tasks_its_plans_have(path: Path) -> None:
    """The specs under bench/ are run by hand on machines a session holds for minutes (the GPU
    machine): a mistake found there costs what it took to get there."""
    import yaml

    loaded = spec.load(path)
    plans = {
        data["id"]: {task["id"] for task in data["tasks"]}
        for data in (
            yaml.safe_load(p.read_text()) for p in (REPO / "records" / "plans").glob("*.yaml")
        )
    }
    for ref in loaded.resolves:
        plan, task = str(ref).split("#", 1)
        assert task in plans.get(plan, set()), ref
