"""`kbgen bench --estimate`: a design costed from earlier records, before anything starts."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.kb import documents
from kbgen.kb.models import ModelInfo, Record
from kbgen.record import cost
from kbgen.record.estimate import estimate
from kbgen.run import spec as specs
from tests.conftest import REPO

EARLIER = REPO / "records" / "2026-11-29-ngram-vs-baseline.yaml"  # as kbgen bench made it
SPEC = REPO / "bench" / "experiments" / "ngram-vs-baseline.yaml"


def spec_with(tmp_path: Path, **workload: object) -> specs.ExperimentSpec:
    data = yaml.safe_load(SPEC.read_text())
    data["workload"].update(workload, prompts=str(REPO / data["workload"]["prompts"]))
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return specs.load(path)


def test_a_design_is_costed_from_the_earlier_record_on_its_model_and_hardware(
    tmp_path: Path,
) -> None:
    earlier = documents.load_model(EARLIER, Record)
    assert earlier.config is not None
    spec = spec_with(tmp_path, rounds=4, stop="when-decided")
    found = estimate(spec, 10, earlier.config.hardware, [earlier])
    assert found.records == [earlier.id]
    assert found.spread is not None and 0.05 < found.spread < 0.5
    steps = found.windows()
    assert len(steps) == 8 and cost.starts(steps) == 5  # ABBA ABBA: the arm ending one round
    window = found.window_s()
    assert window is not None and window > 0
    assert found.minutes() == pytest.approx(
        (cost.starts(steps) * (found.startup_s or 0) + 8 * window) / 60
    )
    assert (found.minutes(2) or 0) < (found.minutes() or 0)  # the first look is cheaper
    # the spread the earlier record's prompts had: more prompts than 10 decide 5%
    fixed, anytime = found.needed(False), found.needed(True)
    assert fixed is not None and anytime is not None and 10 < fixed < anytime
    text = "\n".join(found.lines(None))
    assert "stops when decided, at most 4 round(s): 5 server start(s), 8 window(s)" in text
    assert "warning: 10 prompts per class cannot decide the minimum effect" in text
    assert earlier.id in text
    # the "795 prompts per class where 10 decided": what the count assumes is said,
    # and what an effect as far from the minimum as the earlier ones were would need
    assert "an effect as near the minimum effect as 0% or +10.2%" in text
    assert found.distance is not None
    assert f"the earlier records' effects lay {math.expm1(found.distance):.1%} from the" in text
    assert (found.needed(True, found.distance) or 0) < anytime


def test_other_hardware_or_another_model_is_not_estimated_from(tmp_path: Path) -> None:
    earlier = documents.load_model(EARLIER, Record)
    assert earlier.config is not None
    spec = spec_with(tmp_path)
    other = earlier.config.hardware.model_copy(update={"cpu": "another CPU"})
    found = estimate(spec, 10, other, [earlier])
    assert found.records == [] and found.minutes() is None
    assert "no earlier record on this model and hardware" in "\n".join(found.lines(None))
    renamed = earlier.model_copy(
        update={"config": earlier.config.model_copy(update={"model": ModelInfo(name="another")})}
    )
    assert estimate(spec, 10, earlier.config.hardware, [renamed]).records == []


def test_the_command_starts_nothing_and_says_when_there_is_nothing_to_estimate_from(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "spec.yaml"
    data = yaml.safe_load(SPEC.read_text())
    data["workload"]["prompts"] = str(REPO / data["workload"]["prompts"])
    spec.write_text(yaml.safe_dump(data))
    ran = CliRunner().invoke(
        cli, ["bench", str(spec), "--estimate", "--records", str(tmp_path / "none")]
    )
    assert ran.exit_code == 0, ran.output
    assert "no earlier record" in ran.output
    assert not (tmp_path / "runs").exists() and not Path("runs").exists()
    resumed = CliRunner().invoke(cli, ["bench", "--resume", str(tmp_path), "--estimate"])
    assert resumed.exit_code == 2 and "--estimate takes a SPEC_FILE" in resumed.output


def test_a_request_s_time_follows_the_earlier_rates_and_the_spec_s_length(
    tmp_path: Path,
) -> None:
    earlier = documents.load_model(EARLIER, Record)
    assert earlier.config is not None
    short, long = (
        estimate(spec_with(tmp_path, max_tokens=n), 10, earlier.config.hardware, [earlier])
        for n in (16, 160)
    )
    assert earlier.workload is not None
    assert set(short.request_s) == set(earlier.workload.classes)
    for cls in short.request_s:
        per_token = (long.request_s[cls] - short.request_s[cls]) / 144  # seconds per token more
        rates = [m[cls]["decode_tok_s"].mean for m in earlier.measurements.values()]
        assert math.isclose(per_token, sum(1 / r for r in rates) / len(rates))


def test_a_design_of_one_round_is_told_what_two_would_cost(tmp_path: Path) -> None:
    earlier = documents.load_model(EARLIER, Record)
    assert earlier.config is not None
    one = estimate(spec_with(tmp_path, rounds=1), 10, earlier.config.hardware, [earlier])
    said = [line for line in one.lines(None) if "one round decides nothing" in line]
    assert said == [
        "warning: one round decides nothing (its arms ran one after the other, confounded with "
        "time): rounds: 2 costs 3 server start(s) and 4 window(s), or accept it with "
        "workload.accept_time_confound: true"
    ]
    accepted = spec_with(tmp_path, rounds=1, accept_time_confound=True)
    lines = estimate(accepted, 10, earlier.config.hardware, [earlier]).lines(None)
    assert not any("one round decides nothing" in line for line in lines)
