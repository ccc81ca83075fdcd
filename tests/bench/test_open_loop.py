"""Open-loop load: a spec's request rate and arrivals, checked; a sweep of rates run on the
paced stand-in server, every arm sent the same prompts at the same times, and recorded."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbgen.bench import driver as bench
from kbgen.bench import provenance
from kbgen.errors import InvalidInput
from kbgen.kb.models import Arrivals
from kbgen.record import compose, recompute, write
from kbgen.run import arrivals
from kbgen.run import spec as specs
from kbgen.run.folder import RunFolder
from kbgen.site import render
from tests.bench.test_sweep import spec_data
from tests.support.paced_server import Loads, PacedVllm, Switching

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}


def load(tmp_path: Path, data: dict[str, Any]) -> specs.ExperimentSpec:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return specs.load(path)


def open_loop(tmp_path: Path, sweep: dict[str, Any] | None = None, **workload: Any) -> Any:
    """test_sweep's spec of 8 prompts, two arms, two rounds, sent open loop."""
    data = spec_data(tmp_path, sweep or {}, **{"rounds": 2, "order_seed": 3, **workload})
    data["variants"]["ngram"] = {"speculative_config": NGRAM}
    return data


def test_a_swept_request_rate_is_a_load_level(tmp_path: Path) -> None:
    spec = load(tmp_path, open_loop(tmp_path, {"workload.request_rate": [2, 0.5]}, concurrency=8))
    assert spec.loads == [{"request_rate": 2}, {"request_rate": 0.5}] and spec.open_loop
    assert spec.workload_at(1).request_rate == 0.5 and spec.workload_at(1).concurrency == 8
    closed = load(tmp_path, open_loop(tmp_path))
    assert not closed.open_loop and closed.workload.request_rate is None
    bursty = {"process": "gamma", "burstiness": 0.5}  # arriving at the swept rates
    swept = open_loop(tmp_path, {"workload.request_rate": [2]}, concurrency=8, arrivals=bursty)
    assert load(tmp_path, swept).workload.arrivals == Arrivals(**bursty)


@pytest.mark.parametrize(
    ("workload", "sweep", "field", "message"),
    [
        ({"request_rate": 4}, {}, "workload.concurrency", "--max-concurrency"),
        ({}, {"workload.request_rate": [1, 2]}, "workload.concurrency", "in flight at most"),
        ({"arrivals": {"process": "gamma"}}, {}, "workload.arrivals", "needs a `request_rate`"),
        (
            {"request_rate": 4, "concurrency": 2, "arrivals": {"burstiness": 0.5}},
            {},
            "workload.arrivals.burstiness",
            "gamma process's shape",
        ),
        ({"request_rate": 0, "concurrency": 2}, {}, "workload.request_rate", "greater than 0"),
        (
            {"concurrency": 2},
            {"workload.request_rate": [1, 2], "workload.concurrency": [1, 2]},
            "sweep.workload.concurrency",
            "not both",
        ),
        (
            {"concurrency": 2},
            {"workload.request_rate": [1, -1]},
            "sweep.workload.request_rate",
            "requests per second",
        ),
    ],
)
def test_an_open_loop_that_cannot_run_is_a_located_error(
    tmp_path: Path, workload: dict[str, Any], sweep: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message) as caught:
        load(tmp_path, open_loop(tmp_path, sweep, **workload))
    [problem] = caught.value.problems
    assert problem.field == field and problem.line is not None


def run(tmp_path: Path, data: dict[str, Any]) -> RunFolder:
    """The spec run on the paced server: 400 tokens/s, the n-gram arm twice as fast."""
    from aiohttp.test_utils import TestServer

    spec = load(tmp_path, data)
    paced = PacedVllm(lambda setting, streams: 800.0 if setting == "ngram" else 400.0)

    async def go() -> RunFolder:
        server = TestServer(paced.app(), host="127.0.0.1")
        await server.start_server()
        launcher = Switching(paced, str(server.make_url("")).rstrip("/"))
        try:
            text = (tmp_path / "spec.yaml").read_text()
            folder = RunFolder.create(tmp_path / "runs", spec.id, text, provenance.new_meta(spec))
            await bench.run(spec, folder, Loads(paced), launcher=launcher)
            return folder
        finally:
            await server.close()

    return asyncio.run(go())


@pytest.mark.timing
def test_every_arm_gets_the_same_prompts_at_the_same_times_at_every_rate(tmp_path: Path) -> None:
    data = open_loop(tmp_path, {"workload.request_rate": [20, 40]}, concurrency=4)
    folder = run(tmp_path, data)
    windows: dict[tuple[int, str, int], list[Any]] = collections.defaultdict(list)
    for s in folder.samples():
        assert s.ok and s.sent_ns >= s.scheduled_ns  # never sent before its time
        windows[(s.round or 0, s.variant, s.level or 0)].append(s)
    assert len(windows) == 2 * 2 * 2
    schedules: dict[tuple[int, int], dict[str, list[tuple[int, int]]]] = {}
    for (round_, arm, level), samples in windows.items():
        start = min(s.scheduled_ns for s in samples)
        times = sorted((s.scheduled_ns - start, s.prompt_index) for s in samples)
        rate = [20, 40][level]
        drawn = arrivals.offsets(None, rate, len(samples), round_, level)
        assert [t for t, _ in times] == [round(x * 1e9) for x in drawn]
        schedules.setdefault((round_, level), {})[arm] = times
    for by_arm in schedules.values():  # the baseline's schedule is the n-gram arm's
        assert by_arm["baseline"] == by_arm["ngram"]
    record, evidence = compose.from_run(folder, "open-loop")
    assert record.workload is not None and record.workload.request_rate is None
    assert record.workload.loads == [{"request_rate": 20}, {"request_rate": 40}]
    records = tmp_path / "records"
    records.mkdir()
    write.write(records / "open-loop.yaml", record, evidence)
    assert recompute.recompute(records / "open-loop.yaml") == []


@pytest.mark.timing
def test_a_record_keeps_the_rate_and_the_arrival_process(tmp_path: Path) -> None:
    gamma = {"process": "gamma", "burstiness": 0.5, "seed": 7}
    folder = run(tmp_path, open_loop(tmp_path, request_rate=30, concurrency=4, arrivals=gamma))
    record, _ = compose.from_run(folder, "open-loop")
    assert record.workload is not None and record.workload.request_rate == 30
    assert record.workload.concurrency == 4
    assert record.workload.arrivals is not None
    assert record.workload.arrivals.model_dump() == gamma


@pytest.mark.timing
def test_a_request_due_while_every_slot_is_busy_counts_its_wait(tmp_path: Path) -> None:
    """At 100 requests/s and one request in flight at most (each takes over 40 ms on the paced
    server), the schedule runs ahead of the client: each request waits for the slot, and its
    TTFT from its scheduled time holds the wait that its TTFT from the send leaves out."""
    data = open_loop(tmp_path, request_rate=100, concurrency=1, rounds=1)
    data["workload"]["accept_time_confound"] = True
    folder = run(tmp_path, data)
    measured = [s for s in folder.samples() if s.repeat >= 0]
    assert measured and all(s.on_schedule for s in measured)
    for arm in ("baseline", "ngram"):
        mine = sorted((s for s in measured if s.variant == arm), key=lambda s: s.scheduled_ns)
        waits = [s.metrics()["slot_wait_ms"] for s in mine]
        assert waits[0] < waits[-1] and waits[-1] > 100  # 8 requests due in 70 ms, 40+ ms each
        for s in mine:
            m = s.metrics()
            assert m["ttft_ms"] == pytest.approx(
                m["ttft_sent_ms"] + m["slot_wait_ms"] + m["lag_ms"]
            )
    record, _ = compose.from_run(folder, "open-loop")
    coding = record.measurements["baseline"]["coding"]
    sent, wait = coding["ttft_sent_ms"].mean, coding["slot_wait_ms"].mean
    lag = coding["lag_ms"].mean
    assert coding["ttft_ms"].mean == pytest.approx(sent + wait + lag, rel=1e-4) and wait > lag
    for kept in record.schedule:  # one at a time, the schedule ran ahead: achieved far under
        assert kept.offered_rps == 100 and 0 < kept.achieved_rps < 50
        assert kept.slot_wait_p99_ms > 100 and kept.requests == 8
    assert {kept.variant for kept in record.schedule} == {"baseline", "ngram"}
    pages = render.record_pages(render.environment(None), record, "records/open-loop.yaml", {})
    page = "\n".join(pages.values())
    assert "): `ttft_ms` and `e2e_ms` count from each request's scheduled time" in page
    assert "wait for a free slot under the concurrency cap of 1" in page
    assert "| `slot_wait_ms` (ms) | baseline |" in page
    assert "| baseline | – | 100 | " in page
    (tmp_path / "closed").mkdir()
    closed = run(tmp_path / "closed", open_loop(tmp_path / "closed"))
    assert all(s.on_schedule is None and "lag_ms" not in s.metrics() for s in closed.samples())
