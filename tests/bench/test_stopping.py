"""Runs that stop when decided, on a paced stand-in server of known truth: a large effect stops
at its first look, one at the minimum effect runs to the budget, racing drops a refuted setting."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from kbgen.bench import driver as bench
from kbgen.bench import spec as specs
from kbgen.bench.runs import RunFolder
from kbgen.kb.models import Outcome
from kbgen.record import compose, cost, recompute, stopping, write
from tests.support.paced_server import Loads, PacedVllm, Switching

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}


def spec_data(
    tmp_path: Path, variants: dict[str, Any], sweep: dict[str, Any] | None = None, **workload: Any
) -> dict[str, Any]:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"class": "coding", "prompt": f"write f{i}"}) + "\n" for i in range(12))
    )
    return {
        "schema_version": 1,
        "id": "stopping",
        "title": "n-gram, stopped when decided",
        "hypothesis": {
            "statement": "speculation speeds decoding",
            "primary_metric": "decode_tok_s",
            "direction": "increase",
            "minimum_effect": 0.05,
        },
        "server": {"launcher": "external", "url": "http://127.0.0.1:1"},
        "baseline": "baseline",
        "variants": {"baseline": {}, **variants},
        "workload": {
            "prompts": str(prompts),
            "classes": ["coding"],
            "repeats": 1,
            "warmup": 1,
            "max_tokens": 16,
            "rounds": 4,
            "order_seed": 3,
            "stop": "when-decided",
            **workload,
        },
        **({"sweep": sweep} if sweep else {}),
    }


def run(tmp_path: Path, data: dict[str, Any], truth: dict[str, float]) -> tuple[RunFolder, list]:
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
