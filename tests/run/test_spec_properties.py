"""Property: a spec mutated at random either loads and plans a run that can be sent, or is
located lines, exit 1 — and then `kbgen bench` leaves no run folder behind.

The mutations start from the repository's reference spec. A spec that loads is taken as far as
kbgen goes before the server: its prompt suite, its plan of requests, each variant's server
arguments and every request body, which must be valid JSON (no NaN, no Infinity).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given

from kbgen.bench import bodies, driver
from kbgen.cli import cli
from kbgen.run import design, spec
from tests.conftest import REPO
from tests.support.properties import (
    SETTINGS,
    Mutated,
    assert_cli_outcome,
    assert_located_error,
    deadline,
    deep_text,
    mutated,
    paths_of,
)

DEMO = REPO / "bench" / "experiments" / "ngram-vs-baseline.yaml"
TREE = yaml.safe_load(DEMO.read_text())
TREE["workload"]["prompts"] = str(REPO / TREE["workload"]["prompts"])  # the tests chdir
PATHS = paths_of(TREE)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spec")


def _as_far_as_the_server(path: Path) -> None:
    experiment = spec.load(path)
    suite = driver.check_inputs(experiment, path)
    keys = design.plan(experiment, suite)
    assert len(keys) <= spec.MAX_REQUESTS
    for variant in experiment.variants.values():
        if variant.speculative_config is not None:  # the JSON vLLM reads
            json.loads(spec.server_args(variant)[-1])
    for key in keys[: len(suite)]:
        body = bodies.payload(experiment.workload, "m", suite[key.prompt_class][key.prompt_index])
        json.dumps(body, allow_nan=False)  # what the client sends must be JSON


def test_the_reference_spec_goes_as_far_as_the_server(folder: Path) -> None:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(TREE, sort_keys=False))
    _as_far_as_the_server(path)


@SETTINGS
@given(mutation=mutated(TREE, PATHS))
def test_a_mutated_spec_runs_or_is_located(folder: Path, mutation: Mutated) -> None:
    path = folder / "spec.yaml"
    path.write_text(deep_text(yaml.safe_dump(mutation.tree, allow_unicode=True, sort_keys=False)))
    prompts = mutation.tree.get("workload", {})
    prompts = Path(str(prompts.get("prompts"))) if isinstance(prompts, dict) else path
    with deadline(20):
        try:
            _as_far_as_the_server(path)
        except Exception as exc:  # the property is about which exceptions come out
            assert_located_error(exc, path, prompts)
            runs = folder / "runs"
            result = CliRunner().invoke(cli, ["bench", str(path), "--runs", str(runs)])
            assert_cli_outcome(result, path, prompts)
            assert result.exit_code == 1 and not runs.exists()
