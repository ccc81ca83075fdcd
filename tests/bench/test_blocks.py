"""A run's blocks without a cluster: each block's spec, the driver's folders, and what a node
may send (the cluster itself: tests/bench/test_cluster.py)."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import pytest

from kbgen.bench import blocks, driver, provenance
from kbgen.bench.launch import Launched, Waiting
from kbgen.errors import ClientFailed, ServerFailed, UsageError
from kbgen.kb.models import Cost, Variant
from kbgen.record import cost
from kbgen.run import design
from kbgen.run.folder import RunFolder
from kbgen.run.models import VariantRun, Window, pooled
from kbgen.run.spec import load
from tests.support.specs import small_spec

SPEC = """schema_version: 1
id: spread
title: spread over blocks
hypothesis: {statement: s, primary_metric: decode_tok_s, direction: increase, minimum_effect: 0.05}
server:
  launcher: process   # each block starts its own
  command: [vllm, serve]
  model: m
  port: 8100
baseline: a
variants: {a: {}, b: {args: [--x, "1"]}}
workload: {prompts: PROMPTS, classes: [coding, math], rounds: 2, order_seed: 7}
cluster: {blocks: 3, num_gpus: 0.5, resources: {h200: 1}}
"""


def spec_file(tmp_path: Path) -> Path:
    small_spec(tmp_path)  # writes prompts.jsonl
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace("PROMPTS", str(tmp_path / "prompts.jsonl")))
    return path


def test_a_block_runs_on_its_own_port_with_its_own_order_and_no_cluster_section(
    tmp_path: Path,
) -> None:
    path = spec_file(tmp_path)
    spec = load(path)
    text = blocks.block_spec(path.read_text(), spec, 2)
    assert "# each block starts its own" in text  # the author's comments kept
    (tmp_path / "b.yaml").write_text(text)
    mine = load(tmp_path / "b.yaml")
    assert mine.cluster is None
    assert mine.server.port == 8102  # type: ignore[union-attr]
    assert mine.workload.order_seed == 9
    suite = driver.check_inputs(spec, path)
    first = design.round_requests(spec.workload, suite, 0)
    assert design.round_requests(mine.workload, suite, 0) != first  # blocks differ in order


def test_the_driver_makes_a_folder_per_block_with_no_machine_until_its_node_says(
    tmp_path: Path,
) -> None:
    path = spec_file(tmp_path)
    spec = load(path)
    top = RunFolder.create(
        tmp_path / "runs", spec.id, path.read_text(), provenance.new_meta(spec, path)
    )
    blocks.create(top, spec, "ray://head.example:10001")
    meta = top.meta()
    assert meta.cluster is not None and meta.order == [] and meta.hardware is None
    assert [b.path for b in meta.cluster.blocks] == ["blocks/0", "blocks/1", "blocks/2"]
    parts = top.blocks()
    for i, part in enumerate(parts):
        own = part.meta()
        assert own.hardware is None and own.order_seed == 7 + i and own.cluster is None
        assert own.order == design.windows(load(part.spec_path))
    assert RunFolder(parts[0].path).blocks() == []  # a block is a run on one machine


@pytest.mark.parametrize(
    ("server", "said"),
    [
        ({"launcher": "external", "url": "http://127.0.0.1:1"}, "launcher: process"),
        (None, "`cluster` section"),
    ],
)
def test_a_spec_that_cannot_run_over_a_cluster_says_why(
    tmp_path: Path, server: dict[str, str] | None, said: str
) -> None:
    spec = small_spec(tmp_path, server=server)
    if server is not None:
        spec = spec.model_copy(update={"cluster": load(spec_file(tmp_path)).cluster})
    with pytest.raises(UsageError, match=said):
        blocks.check(spec)


def test_what_a_node_sends_lands_only_inside_its_block_folder(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    (tmp_path / "metrics").mkdir()
    (tmp_path / "logs").mkdir()
    blocks.apply(folder, {"a"}, ("log", "a", b"line one\n"))
    blocks.apply(folder, {"a"}, ("log", "a", b"line two\n"))
    blocks.apply(folder, {"a"}, ("metrics", "a-0-before", b"# scrape\n"))
    assert folder.read_log("a") == "line one\nline two\n"
    assert (tmp_path / "metrics" / "a-0-before.prom").read_bytes() == b"# scrape\n"
    for bad in (
        ("metrics", "../../escape", b""),
        ("metrics", "/etc/x", b""),
        ("log", "not-a-variant", b""),
        ("log", "../a", b""),
        ("exec", "", b"rm -rf /"),
    ):
        with pytest.raises(ServerFailed, match="not a message kbgen sends"):
            blocks.apply(folder, {"a"}, bad)
    assert sorted(p.name for p in tmp_path.rglob("*")) == [
        "a-0-before.prom",
        "a.log",
        "logs",
        "metrics",
    ]


def test_a_nodes_failure_comes_back_as_the_error_it_was() -> None:
    assert isinstance(blocks.failure("ClientFailed", "x"), ClientFailed)
    assert isinstance(
        blocks.failure("InvalidInput", "x"), ServerFailed
    )  # takes problems, not a line
    assert isinstance(blocks.failure("SystemExit", "x"), ServerFailed)  # no kbgen error: a failure
    assert (
        str(blocks.failure("ServerFailed", "block 0 on node ab: why")) == "block 0 on node ab: why"
    )


def window(index: int) -> Window:
    return Window(index=index, start_ns=0, end_ns=10**9, attempt=0, before="b", after="a")


def test_the_blocks_pooled_are_one_run_with_every_window_and_start(tmp_path: Path) -> None:
    path = spec_file(tmp_path)
    spec = load(path)
    meta = provenance.new_meta(spec, path)
    run = VariantRun(
        url="u",
        command=[],
        env={},
        reused_server=False,
        engine_version="1",
        model="m",
        max_model_len=None,
        windows=[window(0)],
        startup_s=[10.0],
        up_s=[20.0],
    )
    parts = [meta.model_copy(update={"variants": {"a": run.model_copy(deep=True)}}) for _ in "xy"]
    both = pooled(meta, parts)
    assert len(both.variants["a"].windows) == 2
    assert both.variants["a"].startup_s == [10.0, 10.0]
    assert both.variants["a"].up_s == [20.0, 20.0]
    assert parts[0].variants["a"].startup_s == [10.0]  # the blocks' own are left as they were


def test_the_cost_of_blocks_adds_up() -> None:
    one = Cost.model_validate(
        {
            "design": "fixed",
            "starts": 3,
            "startup_minutes": 1.5,
            "server_minutes": 4.25,
            "accelerators": 1,
            "accelerator_minutes": 4.25,
            "window_minutes": 2.0,
            "windows": 4,
            "planned_windows": 4,
            "requests": 64,
            "output_tokens": 1024,
        }
    )
    both = cost.pooled([one, one])
    assert both.starts == 6 and both.requests == 128 and both.output_tokens == 2048
    assert both.accelerators == 2 and both.accelerator_minutes == 8.5
    assert both.server_minutes == 8.5 and both.startup_minutes == 3.0
    assert both.windows == both.planned_windows == 8
    assert json.loads(both.model_dump_json())["design"] == "fixed"
    shared = cost.pooled([one, one], accelerators=1)  # two blocks on halves of one GPU
    assert shared.accelerators == 1 and shared.accelerator_minutes == 8.5


def test_a_block_on_a_worker_ray_started_niced_runs_at_full_priority_or_says_how(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    set_to: list[int] = []
    monkeypatch.setattr(os, "getpriority", lambda which, who: 15)
    monkeypatch.setattr(os, "setpriority", lambda which, who, value: set_to.append(value))
    blocks._full_priority()
    assert set_to == [0]

    def refused(which: int, who: int, value: int) -> None:
        raise PermissionError("not permitted")

    monkeypatch.setattr(os, "setpriority", refused)
    with pytest.raises(UsageError, match="RAY_worker_niceness=0"):
        blocks._full_priority()


class Slow:
    """A launcher whose start takes a while and notes when it began and ended."""

    def __init__(self, spans: list[tuple[str, float, float]], name: str) -> None:
        self.spans, self.name = spans, name

    async def start(self, name: str, variant: Variant, log: Path, waiting: Waiting) -> Launched:
        began = time.monotonic()
        await asyncio.sleep(0.3)
        self.spans.append((self.name, began, time.monotonic()))
        return Launched("http://127.0.0.1:1", reused=True)

    async def stop(self) -> None: ...

    def alive(self) -> bool:
        return True


@pytest.mark.parametrize("shared", [True, False])
def test_blocks_sharing_a_gpu_start_their_servers_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: bool
) -> None:
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    spans: list[tuple[str, float, float]] = []

    async def both() -> None:
        one, two = (blocks.Tethered(Slow(spans, n), shared) for n in "ab")
        variant = Variant()
        await asyncio.gather(*(t.start("v", variant, tmp_path / "log", print) for t in (one, two)))

    asyncio.run(both())
    (_, _, a1), (_, b0, _) = sorted(spans, key=lambda s: s[1])
    assert (b0 >= a1) is shared  # shared: the second began once the first had started
