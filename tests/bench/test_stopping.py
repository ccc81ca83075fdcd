"""Runs that stop when decided, on a paced stand-in server of known truth: a large effect stops
at its first look, one at the minimum effect runs to the budget, racing drops a refuted setting."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbgen.bench import driver as bench
from kbgen.bench import provenance
from kbgen.errors import InvalidInput
from kbgen.kb.models import Outcome
from kbgen.record import compose, cost, recompute, stopping, write
from kbgen.run import budget, design
from kbgen.run import spec as specs
from kbgen.run.folder import RunFolder
from tests.bench.test_sweep import spec_data as sweep_data
from tests.support.paced_server import Loads, PacedVllm, Switching

# the paced server's verdicts need the cores to themselves: run apart from other tests
pytestmark = pytest.mark.timing

# each request's speed ±6% its own: intervals as wide as a real server's give (about ±4% after
# two rounds of 8 prompts), so a truth at the minimum effect stays undecided whatever the
# client's overhead per request (a noiseless server's intervals are ±1%: a 0.5% overhead
# decides)
SPREAD = 0.06

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
    tmp_path: Path,
    data: dict[str, Any],
    truth: dict[str, float],
    drift: float = 0.0,
    looks: list[tuple[int, dict[tuple[int, str], int]]] | None = None,
) -> tuple[RunFolder, list[str]]:
    """Run the spec on the paced server, each setting `truth[setting]` times 400 tokens/s, the
    server slowing by `drift` over the tokens of the whole budget; each look's round and the
    samples the folder held by (round, variant) then appended to `looks`."""
    from aiohttp.test_utils import TestServer

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = specs.load(path)
    w = spec.workload
    windows = len(design.windows(spec))
    budget = windows * (w.warmup + w.repeats * 8) * w.max_tokens  # test_sweep's 8 prompts

    def rate(setting: str, _streams: int) -> float:
        return 400.0 * truth[setting] * (1 - drift * min(1.0, paced.generated / budget))

    paced = PacedVllm(rate, spread=SPREAD)
    starts: list[str] = []

    async def go() -> RunFolder:
        server = TestServer(paced.app(), host="127.0.0.1")
        await server.start_server()
        launcher = Switching(paced, str(server.make_url("")).rstrip("/"))
        try:
            folder = RunFolder.create(
                tmp_path / "runs", spec.id, path.read_text(), provenance.new_meta(spec)
            )
            looker = stopping.looker(spec, folder)

            def look(round_: int) -> design.Looked:
                if looks is not None:
                    held: dict[tuple[int, str], int] = {}
                    for sample in folder.samples():
                        key = (sample.round or 0, sample.variant)
                        held[key] = held.get(key, 0) + 1
                    looks.append((round_, held))
                return looker(round_)

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
    planned = design.steps(list(meta.order))
    assert meta.stopped is not None and meta.stopped.reason == "decided"
    assert meta.stopped.round == 1  # the first round that may stop: the second
    assert {s.round for s in folder.samples()} == {0, 1}
    assert len(launched) < cost.starts(planned)
    record = recorded(tmp_path, folder)
    assert record.verdict.outcome == Outcome.SUPPORTED
    assert record.verdict.per_class["coding"].interval == "student-t"
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


def test_a_drifting_server_is_looked_at_only_on_whole_rounds_and_decides_nothing(
    tmp_path: Path,
) -> None:
    """The server slows by 4% over the run, the variant is 5% faster (the minimum effect): each
    look sees every arm's every round so far, whole, and none decides it (the landed driver's
    looks inside a window saw one arm's newest requests and took the drift for effect)."""
    data = spec_data(tmp_path, {"ngram": {"speculative_config": NGRAM}})
    looks: list[tuple[int, dict[tuple[int, str], int]]] = []
    folder, _ = run(tmp_path, data, {"baseline": 1.0, "ngram": 1.05}, 0.04, looks)
    assert [r for r, _ in looks] == [0, 1, 2, 3]  # every round's end (the first may not stop)
    for round_, held in looks:
        assert held == {(r, arm): 8 for r in range(round_ + 1) for arm in ("baseline", "ngram")}
    assert folder.meta().stopped is None
    assert recorded(tmp_path, folder).verdict.outcome == Outcome.INCONCLUSIVE


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
    asked: list[tuple[list[design.Step], str | None]] = []

    def an_hour(meta: Any, ahead: list[design.Step], serving: str | None) -> float:
        asked.append((ahead, serving))
        return 3600.0

    monkeypatch.setattr(budget, "seconds", an_hour)
    data = spec_data(tmp_path, {"ngram": {"speculative_config": NGRAM}}, max_minutes=30)
    folder, launched = run(tmp_path, data, {"baseline": 1.0, "ngram": 1.05})
    meta = folder.meta()
    assert meta.stopped is not None and meta.stopped.reason == "minutes"
    assert meta.stopped.round == 0 and meta.stopped.windows == 2 and len(launched) == 2
    first = [arm for _, arm, _ in design.steps(meta.order)[:2]]
    # asked once, at round 2's first window: its two windows, the arm that ended round 1 serving
    assert asked == [([(1, first[1], 0), (1, first[0], 0)], first[1])]


def test_a_round_that_fits_the_budget_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    predicted: list[float] = []
    real = budget.seconds

    def spy(meta: Any, ahead: list[design.Step], serving: str | None) -> float:
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
