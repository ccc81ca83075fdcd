"""Senders: client processes give the samples one event loop gives, and a dying one loses none.

Against tests/support/fake_server.py (a real capture replayed over loopback HTTP), served from
the test's own event loop; the client processes are real ones (`python -m kbgen.bench.senders`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
from aiohttp.test_utils import TestServer

from kbgen.bench import driver as bench
from kbgen.bench import provenance, senders
from kbgen.bench import totals as run_totals
from kbgen.bench.client import Client, Timeouts
from kbgen.bench.launch import Launched
from kbgen.errors import ClientFailed
from kbgen.kb.models import Load
from kbgen.run.folder import RunFolder
from kbgen.run.samples import Sample
from tests.support.fake_server import FakeVllm
from tests.support.specs import small_spec

JOBS = 12
BODY = {"model": "fake", "prompt": "p", "max_tokens": 5}


@asynccontextmanager
async def fake_server(fake: FakeVllm | None = None) -> AsyncIterator[str]:
    server = TestServer((fake or FakeVllm()).app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url(""))
    finally:
        await server.close()


def jobs(count: int = JOBS) -> list[senders.Job]:
    return [
        senders.Job(
            "completions",
            BODY,
            Sample(
                variant="a",
                prompt_class="c",
                prompt_index=i,
                repeat=0,
                round=1,
                attempt=2,
                scheduled_ns=0,
                sent_ns=0,
            ),
        )
        for i in range(count)
    ]


async def sent(processes: int, concurrency: int = 4) -> tuple[list[Sample], int, int]:
    """The samples of `jobs()` sent through `processes` processes, in the order they came,
    and the window (perf_counter_ns of this process) around the send."""
    got: list[Sample] = []

    async def keep(sample: Sample) -> bool:
        got.append(sample)
        return True

    async with fake_server() as url, Client(url) as client:
        sender: Any = senders.InProcess(client)
        async with senders.Processes(url, Timeouts(), max(processes, 2)) as pool:
            if processes > 1:
                sender = pool
            begin = _now()
            await sender.send(jobs(), concurrency, keep)
            end = _now()
    return got, begin, end


def _now() -> int:
    return time.perf_counter_ns()


@pytest.mark.parametrize(
    ("setting", "concurrency", "cpus", "expected"),
    [
        (1, 256, 8, 1),
        (4, 256, 8, 4),
        (4, 2, 8, 2),  # never more processes than streams
        ("auto", 1, 8, 1),
        ("auto", 128, 8, 1),
        ("auto", 129, 8, 2),
        ("auto", 512, 8, 4),
        ("auto", 4096, 8, 8),  # at most one per CPU
        ("auto", 512, 1, 1),
    ],
)
def test_how_many_processes(
    monkeypatch: pytest.MonkeyPatch, setting: Any, concurrency: int, cpus: int, expected: int
) -> None:
    monkeypatch.setattr(senders, "_usable_cpus", lambda: cpus)
    assert senders.processes_for(setting, concurrency) == expected


@pytest.mark.parametrize("processes", [2, 3])
def test_processes_give_the_samples_one_process_gives(processes: int) -> None:
    one, _, _ = asyncio.run(sent(1))
    many, begin, end = asyncio.run(sent(processes))

    def row(sample: Sample) -> dict[str, Any]:
        data = sample.model_dump(exclude_none=True)
        for stamp in ("scheduled_ns", "sent_ns", "done_ns", "chunk_ns"):
            data[stamp] = type(data[stamp]).__name__  # the shape, not the time
        return data

    by_index = sorted(many, key=lambda s: s.prompt_index)
    assert [row(s) for s in by_index] == [row(s) for s in sorted(one, key=lambda s: s.prompt_index)]
    assert [s.prompt_index for s in by_index] == list(range(JOBS))
    for s in many:
        assert s.ok and s.output_hash and s.output_tokens == sum(s.chunk_tokens) > 0
        assert s.round == 1 and s.attempt == 2  # where it belongs, kept on the way
        assert len(s.chunk_ns) == len(s.chunk_tokens)
        # stamped in the worker on receipt, on the clock this process reads: in order, and
        # inside the window this process saw
        assert begin <= s.scheduled_ns <= s.sent_ns <= s.chunk_ns[0]
        assert s.chunk_ns == sorted(s.chunk_ns) and s.chunk_ns[-1] <= (s.done_ns or 0) <= end
    assert len({s.output_hash for s in many}) == 1  # one capture: one text


def test_sent_in_order_and_a_stop_sends_no_more() -> None:
    async def go() -> tuple[list[Sample], list[Sample], list[Sample]]:
        first: list[Sample] = []
        again: list[Sample] = []
        warm: list[Sample] = []

        async def stop_at_once(sample: Sample) -> bool:
            first.append(sample)
            return False

        async def keep(sample: Sample) -> bool:
            again.append(sample)
            return True

        async def keep_warm(sample: Sample) -> bool:
            warm.append(sample)
            return True

        async with fake_server() as url, senders.Processes(url, Timeouts(), 2) as pool:
            await pool.send(jobs(200), 2, stop_at_once)
            await pool.send(jobs(), 4, keep)  # the same processes, a new batch
            await pool.send(jobs(3), 3, keep_warm)
        return first, again, warm

    first, again, warm = asyncio.run(go())
    # what was in flight or queued ahead still finishes, and nothing after it is sent
    assert 1 <= len(first) <= 2 * 2
    assert sorted(s.prompt_index for s in again) == list(range(JOBS))
    assert sorted(s.prompt_index for s in warm) == [0, 1, 2]


def _clients() -> list[psutil.Process]:
    """This test's client processes: the children running kbgen.bench.senders."""
    return [
        child
        for child in psutil.Process().children()
        if "kbgen.bench.senders" in " ".join(child.cmdline())
    ]


class KillAWorker:
    """Events that SIGKILL a client process once `after` samples have come back."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.seen: list[Sample] = []
        self.killed: int | None = None

    def round_started(self, round: int, rounds: int) -> None: ...

    def waiting(self, variant: str, seconds: float) -> None: ...

    def variant_started(self, variant: str, todo: int, launched: Launched) -> None: ...

    def load_started(self, variant: str, load: Load, todo: int) -> None: ...

    def sample_done(self, sample: Sample) -> None:
        self.seen.append(sample)
        if len(self.seen) == self.after and self.killed is None:
            self.killed = _clients()[0].pid
            os.kill(self.killed, signal.SIGKILL)


def _spec(url: str, tmp_path: Path, **workload: Any) -> Any:
    server = {"launcher": "external", "url": url, "startup_timeout_s": 5}
    return small_spec(tmp_path, "fake", server=server, repeats=4, concurrency=4, **workload)


def _run(tmp_path: Path, name: str, events: Any = None, **workload: Any) -> RunFolder:
    async def go() -> RunFolder:
        async with fake_server() as url:
            spec = _spec(url, tmp_path, **workload)
            folder = RunFolder.create(
                tmp_path / name, spec.id, "schema_version: 1\n", provenance.new_meta(spec)
            )
            await bench.run(spec, folder, events)
            return folder

    return asyncio.run(go())


def test_a_run_over_processes_keeps_the_rows_one_process_keeps(tmp_path: Path) -> None:
    one = _run(tmp_path, "one", client_processes=1)
    many = _run(tmp_path, "many", client_processes=2)

    def rows(folder: RunFolder) -> list[tuple[Any, ...]]:
        return sorted(
            (
                s.variant,
                s.prompt_class,
                s.prompt_index,
                s.repeat,
                s.attempt,
                s.output_tokens,
                s.chunk_tokens,
                s.output_hash,
                sorted(s.model_dump(exclude_none=True)),
            )
            for s in folder.samples()
        )

    assert rows(many) == rows(one) and len(rows(one)) == 2 * 6 * 4
    assert all(s.ok for s in many.samples())
    windows = [w for v in many.meta().variants.values() for w in v.windows]
    assert [w.client_processes for w in windows] == [2, 2]
    assert [w.client_processes for v in one.meta().variants.values() for w in v.windows] == [
        None,
        None,
    ]
    totals = run_totals.totals(_spec("http://127.0.0.1:1", tmp_path), many)
    assert all(v.requests_ok == 24 for v in totals.variants.values())


def test_a_dying_client_process_loses_no_finished_sample_and_fails_the_run(
    tmp_path: Path,
) -> None:
    killer = KillAWorker(after=3)
    folder: list[RunFolder] = []

    async def go() -> None:
        async with fake_server() as url:
            spec = _spec(url, tmp_path, client_processes=2)
            folder.append(
                RunFolder.create(
                    tmp_path / "runs", spec.id, "schema_version: 1\n", provenance.new_meta(spec)
                )
            )
            await bench.run(spec, folder[0], killer)

    with pytest.raises(
        ClientFailed,
        match=r"^variant 'a': client process \d \(pid \d+\) died during a window \(killed by "
        r"signal 9\); \d+ finished samples are kept in .*Continue with: kbgen bench --resume ",
    ):
        asyncio.run(go())
    kept = folder[0].samples()
    # every sample the parent was handed is in the run folder, in the order it came
    assert [(s.prompt_class, s.prompt_index, s.repeat) for s in kept] == [
        (s.prompt_class, s.prompt_index, s.repeat) for s in killer.seen
    ]
    assert len(kept) >= 3 and len(kept) < 24
    assert killer.killed is not None and not psutil.pid_exists(killer.killed)
    assert _clients() == []  # the other client process is gone too

    folder[0].update_meta(status="running", attempts=2)  # as `kbgen bench --resume` does
    resumed = _run_resume(tmp_path, folder[0])
    done = {(s.variant, s.prompt_class, s.prompt_index, s.repeat) for s in resumed if s.ok}
    assert len(done) == 2 * 6 * 4


def _run_resume(tmp_path: Path, folder: RunFolder) -> list[Sample]:
    async def go() -> list[Sample]:
        async with fake_server() as url:
            spec = _spec(url, tmp_path, client_processes=2)
            await bench.run(spec, folder)
            return folder.samples()

    return asyncio.run(go())
