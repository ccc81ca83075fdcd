"""The interleaved design: the seeded, balanced order of arms, prompts shuffled within a round,
servers restarted only when the arguments change, and a resume that keeps the recorded order."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbgen.bench import driver as bench
from kbgen.bench import provenance
from kbgen.bench.launch import Launched, ProcessLauncher
from kbgen.kb.models import Variant
from kbgen.run import design
from kbgen.run.folder import RunFolder
from kbgen.run.spec import ExperimentSpec, ProcessServer
from tests.support import fake_server
from tests.support.free_port import free_port
from tests.support.specs import small_spec as spec

SUITE = {"coding": ["c0", "c1", "c2"], "math": ["m0", "m1", "m2"]}


# --- the order --------------------------------------------------------------------------------


def test_one_round_is_the_order_of_before_baseline_first(tmp_path: Path) -> None:
    s = spec(tmp_path, arms=("base", "x", "y"), repeats=2)
    assert design.order(s) == [(0, "base"), (0, "x"), (0, "y")]
    keys = design.plan(s, SUITE)
    assert keys == [
        design.Key(arm, cls, index, repeat)
        for arm in ("base", "x", "y")
        for repeat in range(2)
        for cls in ("coding", "math")
        for index in range(3)
    ]


@pytest.mark.parametrize("arms", [("a", "b"), ("a", "b", "c")])
@pytest.mark.parametrize("rounds", [2, 3, 4, 6])
def test_every_round_runs_every_arm_once_and_each_reverses_the_one_before(
    tmp_path: Path, arms: tuple[str, ...], rounds: int
) -> None:
    steps = design.order(spec(tmp_path, arms=arms, rounds=rounds, order_seed=7))
    by_round = [[arm for r, arm in steps if r == round_] for round_ in range(rounds)]
    assert [r for r, _ in steps] == sorted(r for r, _ in steps)  # round after round
    assert all(sorted(arms_) == sorted(arms) for arms_ in by_round)
    assert all(later == earlier[::-1] for earlier, later in itertools.pairwise(by_round))
    assert all(later[0] == earlier[-1] for earlier, later in itertools.pairwise(by_round))


@pytest.mark.parametrize("arms", [("a", "b"), ("a", "b", "c")])
def test_an_even_number_of_rounds_gives_every_arm_the_same_mean_time(
    tmp_path: Path, arms: tuple[str, ...]
) -> None:
    steps = design.order(spec(tmp_path, arms=arms, rounds=4))
    position = {arm: sum(i for i, (_, a) in enumerate(steps) if a == arm) for arm in arms}
    assert len(set(position.values())) == 1  # a linear drift adds the same to every arm


def test_the_order_is_seeded_and_reproducible(tmp_path: Path) -> None:
    arms = ("a", "b", "c")
    firsts = {
        tuple(arm for r, arm in design.order(spec(tmp_path, arms=arms, rounds=2, order_seed=seed)))
        for seed in range(12)
    }
    assert len(firsts) > 2  # the seed chooses the permutation
    again = [design.order(spec(tmp_path, arms=arms, rounds=2, order_seed=5)) for _ in range(3)]
    assert again[0] == again[1] == again[2]


def test_the_order_is_recorded_in_run_json(tmp_path: Path) -> None:
    s = spec(tmp_path, rounds=4, order_seed=3)
    folder = RunFolder.create(
        tmp_path / "runs", s.id, "schema_version: 1\n", provenance.new_meta(s)
    )
    meta = json.loads((folder.path / "run.json").read_text())
    assert meta["order"] == [list(step) for step in design.order(s)]
    assert meta["order_seed"] == 3


# --- prompts within a round -------------------------------------------------------------------


def test_prompts_are_shuffled_within_a_round_seeded_by_the_round(tmp_path: Path) -> None:
    s = spec(tmp_path, rounds=3, repeats=2, order_seed=1)
    rounds = [design.round_requests(s.workload, SUITE, r) for r in range(3)]
    unshuffled = design.round_requests(spec(tmp_path, repeats=2).workload, SUITE, 0)
    as_sent = [[(k.prompt_class, k.prompt_index, k.repeat) for k in keys] for keys in rounds]
    plain = [(k.prompt_class, k.prompt_index, k.repeat) for k in unshuffled]
    assert all(sorted(sent) == sorted(plain) for sent in as_sent)  # the same requests
    assert len({tuple(sent) for sent in [*as_sent, plain]}) == 4  # in orders of their own
    assert all(k.round == r for r, keys in enumerate(rounds) for k in keys)
    assert design.round_requests(s.workload, SUITE, 2) == rounds[2]  # reproducible
    other_seed = spec(tmp_path, rounds=3, repeats=2, order_seed=2).workload
    assert design.round_requests(other_seed, SUITE, 0) != rounds[0]


def test_every_arm_of_a_round_sends_the_same_sequence(tmp_path: Path) -> None:
    s = spec(tmp_path, rounds=2)
    keys = design.plan(s, SUITE)
    sequences: dict[tuple[int, str], list[tuple[str, int, int]]] = {}
    for k in keys:
        sequences.setdefault((k.round, k.variant), []).append(
            (k.prompt_class, k.prompt_index, k.repeat)
        )
    assert list(sequences) == design.order(s)  # window after window, in the order
    for round_ in (0, 1):
        assert sequences[(round_, "a")] == sequences[(round_, "b")]


# --- against a server -------------------------------------------------------------------------


class Counting:
    """A launcher that counts: wraps the real one and keeps each start's (variant, reused)."""

    def __init__(self, inner: ProcessLauncher) -> None:
        self.inner = inner
        self.starts: list[tuple[str, bool]] = []

    async def start(self, name: str, variant: Variant, log: Path, waiting: Any) -> Launched:
        launched = await self.inner.start(name, variant, log, waiting)
        self.starts.append((name, launched.reused))
        return launched

    async def stop(self) -> None:
        await self.inner.stop()

    def alive(self) -> bool:
        return self.inner.alive()


def process_server() -> dict[str, Any]:
    return {
        "launcher": "process",
        "command": [sys.executable, fake_server.__file__],
        "model": "m",
        "port": free_port(),
        "startup_timeout_s": 30,
    }


@pytest.mark.parametrize(
    ("variants", "fresh"),
    [
        ({"a": {}, "b": {"args": ["--max-num-seqs", "4"]}}, "every change of arm"),
        ({"a": {}, "b": {}}, "once"),  # equal arguments: one server serves both arms
    ],
)
def test_a_round_restarts_the_server_only_when_the_arguments_differ(
    tmp_path: Path, variants: dict[str, Any], fresh: str
) -> None:
    s = spec(tmp_path, server=process_server(), variants=variants, rounds=3, per_class=1)
    assert isinstance(s.server, ProcessServer)
    launcher = Counting(ProcessLauncher(s.server))
    folder = RunFolder.create(
        tmp_path / "runs", s.id, "schema_version: 1\n", provenance.new_meta(s)
    )
    asyncio.run(bench.run(s, folder, launcher=launcher))
    arms = [arm for _, arm in design.order(s)]
    assert [name for name, _ in launcher.starts] == arms  # one start per window
    started = [name for name, reused in launcher.starts if not reused]
    changes = 1 + sum(a != b for a, b in itertools.pairwise(arms))
    assert len(started) == (changes if fresh == "every change of arm" else 1)
    logs = [(folder.path / "logs" / f"{v}.log").read_text() for v in ("a", "b") if v in started]
    assert sum(text.count("$ ") for text in logs) == len(started)  # processes really started


def _bench_fake(
    tmp_path: Path, s: ExperimentSpec, faults: dict[int, str], folder: RunFolder | None = None
) -> RunFolder:
    from aiohttp.test_utils import TestServer

    from tests.support.fake_server import FakeVllm

    async def go() -> RunFolder:
        server = TestServer(FakeVllm(faults).app(), host="127.0.0.1")
        await server.start_server()
        try:
            here = s.model_copy(
                update={"server": s.server.model_copy(update={"url": str(server.make_url(""))})}
            )
            text = yaml.safe_dump(here.model_dump(mode="json", exclude_unset=True))
            run = folder or RunFolder.create(
                tmp_path / "runs", s.id, text, provenance.new_meta(here)
            )
            await bench.run(here, run)
            return run
        finally:
            await server.close()

    return asyncio.run(go())


def test_an_interleaved_run_keeps_rounds_on_samples_windows_and_totals(tmp_path: Path) -> None:
    s = spec(tmp_path, rounds=2, repeats=2, order_seed=4)
    folder = _bench_fake(tmp_path, s, {})
    samples = folder.samples()
    assert len(samples) == 2 * 2 * 6 * 2 and all(x.ok for x in samples)
    sent = [(x.round, x.variant) for x in samples]
    assert list(dict.fromkeys(sent)) == design.order(s)  # window after window, in the order
    assert Counter(sent) == {step: 12 for step in design.order(s)}
    for round_, arm in design.order(s):
        wanted = [
            design.Key(arm, k.prompt_class, k.prompt_index, k.repeat, round_)
            for k in design.round_requests(s.workload, SUITE, round_)
        ]
        assert [
            design.Key(arm, x.prompt_class, x.prompt_index, x.repeat, round_)
            for x in samples
            if (x.round, x.variant) == (round_, arm)
        ] == wanted
    assert all(x.output_hash is not None and len(x.output_hash) == 16 for x in samples)
    meta = folder.meta()
    for arm in ("a", "b"):
        windows = meta.variants[arm].windows
        assert [w.round for w in windows] == [r for r, v in design.order(s) if v == arm]
        assert all(w.load is not None and w.load.cpu_count >= 1 for w in windows)
    summary = json.loads((folder.path / "summary.json").read_text())
    for arm in ("a", "b"):
        totals = summary["variants"][arm]
        assert totals["requests_ok"] == 24  # a request is (class, prompt, repeat, round)
        assert [w["load"] for w in totals["windows"]] == [
            w.load.model_dump() for w in meta.variants[arm].windows if w.load
        ]


def test_one_round_writes_samples_and_windows_without_a_round(tmp_path: Path) -> None:
    folder = _bench_fake(tmp_path, spec(tmp_path), {})
    lines = (folder.path / "samples.jsonl").read_text().splitlines()
    assert lines and all('"round"' not in line for line in lines)
    meta = json.loads((folder.path / "run.json").read_text())
    assert all("round" not in w for v in meta["variants"].values() for w in v["windows"])
    assert meta["order"] == [[0, "a"], [0, "b"]]


def test_a_resume_redoes_only_the_failures_round_by_round_in_the_recorded_order(
    tmp_path: Path,
) -> None:
    s = spec(tmp_path, rounds=3, per_class=2, order_seed=9)
    # request numbers count warm-ups: each window is 1 warm-up and 4 measured requests
    failing = {n: "http-500" for n in (2, 8, 14, 19, 27)}
    folder = _bench_fake(tmp_path, s, failing)
    first = folder.samples()
    failed = {bench._key(x) for x in first if not x.ok}
    assert len(failed) == 5 and {k.round for k in failed} == {0, 1, 2}
    recorded = list(reversed(folder.meta().order or []))
    meta = folder.meta()
    meta.order, meta.status, meta.attempts = recorded, "running", 2  # the order run.json keeps
    folder.write_meta(meta)

    _bench_fake(tmp_path, s, {}, folder)
    redone = folder.samples()[len(first) :]
    assert {bench._key(x) for x in redone} == failed and all(x.ok for x in redone)
    assert all(x.attempt == 1 for x in redone)
    position = {step: i for i, step in enumerate(recorded)}
    at = [position[(x.round or 0, x.variant)] for x in redone]
    assert at == sorted(at)  # window by window, in the recorded order
    totals = json.loads((folder.path / "summary.json").read_text())["variants"]
    assert totals["a"]["requests_ok"] == totals["b"]["requests_ok"] == 12
    assert totals["a"]["requests_failed"] == totals["b"]["requests_failed"] == 0


def test_the_record_keeps_the_order_and_its_samples_file_the_machine_load(tmp_path: Path) -> None:
    from kbgen.record import compose, evidence

    s = spec(tmp_path, rounds=2, order_seed=6)
    folder = _bench_fake(tmp_path, s, {})
    record, found = compose.from_run(folder, "rounds")
    assert record.workload is not None
    assert (record.workload.rounds, record.workload.order_seed) == (2, 6)
    assert record.workload.order == design.order(s) == folder.meta().order
    kept = tmp_path / "samples.jsonl.gz"
    kept.write_bytes(evidence.samples_bytes(found))
    again = evidence.read_samples(kept)
    loads = [w.load for windows in again.windows.values() for w in windows]
    assert len(loads) == 4 and all(load is not None for load in loads)
    assert {x.round for x in again.samples} == {0, 1}


def test_a_record_of_one_round_has_no_order(tmp_path: Path) -> None:
    from kbgen.record import compose

    record, _ = compose.from_run(_bench_fake(tmp_path, spec(tmp_path), {}), "one")
    assert record.workload is not None
    assert "rounds" not in record.workload.model_fields_set
    assert record.workload.order is None
