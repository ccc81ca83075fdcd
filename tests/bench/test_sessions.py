"""Multi-turn sessions: each turn sent with the conversation so far (the answer the server gave,
from a real vLLM chat capture), a think time apart, a failed turn ending its session; and on the
real vLLM (CPU) a multi-turn run, baseline against n-gram, the session the verdict's unit."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
import yaml

from kbgen.bench import sessions
from kbgen.bench.client import Client, ReplayTransport
from kbgen.bench.senders import Job
from kbgen.run import traffic
from kbgen.run.design import Key
from kbgen.run.samples import Sample

CAPTURE = Path(__file__).parents[1] / "fixtures" / "vllm" / "baseline-chat.sse"


def _answer() -> str:
    """The text the capture's stream carries."""
    pieces = []
    for event in CAPTURE.read_text().split("\n\n"):
        if event.startswith("data: {"):
            for choice in json.loads(event[6:]).get("choices", []):
                pieces.append(choice.get("delta", {}).get("content") or "")
    return "".join(pieces)


def _job(index: int, due_ns: int | None = None, system: bool = False) -> Job:
    head = [{"role": "system", "content": "be brief"}] if system else []
    body = {"model": "m", "messages": [*head, {"role": "user", "content": f"turn {index}"}]}
    sample = Sample(
        variant="a", prompt_class="c", prompt_index=index, repeat=0, scheduled_ns=0, sent_ns=0
    )
    return Job("chat", body, sample, due_ns=due_ns)


def _send(transport: ReplayTransport, chats: list[list[Job]], think_s: float = 0.0) -> list[Sample]:
    done: list[Sample] = []

    async def on_done(sample: Sample) -> bool:
        done.append(sample)
        return True

    async def go() -> None:
        async with Client("http://127.0.0.1:1", transport=transport) as client:
            await sessions.send(client, chats, 2, think_s, on_done)

    asyncio.run(go())
    return done


def test_each_turn_is_sent_with_the_conversation_so_far() -> None:
    transport = ReplayTransport([CAPTURE.read_bytes()])
    done = _send(transport, [[_job(0, system=True), _job(1, system=True), _job(2, system=True)]])
    assert [s.ok for s in done] == [True] * 3
    sent = [body["messages"] for _, _, body in transport.sent if body]
    answer = {"role": "assistant", "content": _answer()}
    assert _answer() and sent[0] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "turn 0"},
    ]
    assert sent[1] == [*sent[0], answer, {"role": "user", "content": "turn 1"}]
    assert sent[2] == [*sent[1], answer, {"role": "user", "content": "turn 2"}]


def test_a_turn_waits_its_think_time_after_the_answer_before_it() -> None:
    transport = ReplayTransport([CAPTURE.read_bytes()])
    start = time.perf_counter_ns()
    done = _send(transport, [[_job(0, due_ns=start), _job(1, due_ns=start)]], think_s=0.2)
    first, second = done
    assert first.scheduled_ns == start and first.done_ns is not None
    assert second.scheduled_ns == first.done_ns + 200_000_000  # the think time after the answer
    assert second.sent_ns >= second.scheduled_ns


def test_a_failed_turn_ends_its_session_and_not_the_others() -> None:
    transport = ReplayTransport([b"data: {not json}\n\n"])
    done = _send(transport, [[_job(0), _job(1)], [_job(2), _job(3)]])
    assert sorted(s.prompt_index for s in done) == [0, 1, 2, 3] and not any(s.ok for s in done)
    assert len(transport.sent) == 2  # each session's first turn only, the rest counted failed
    unsent = [s for s in done if s.prompt_index in (1, 3)]
    assert {s.error for s in unsent} == {"not sent: an earlier turn of its session failed"}


def test_a_window_s_requests_make_sessions_of_their_turns_in_order() -> None:
    sent = [("c", 3, 0), ("c", 0, 0), ("c", 2, 0), ("d", 1, 0), ("c", 1, 0), ("c", 0, 1)]
    assert traffic.sessions(sent, 2) == [[2, 0], [1, 4], [3], [5]]  # by turn: index 2, 3
    suite = {"c": ["p"] * 5, "d": ["q"] * 2}
    assert traffic.session_groups(suite, 2)["c"] == [
        "session 1",
        "session 1",
        "session 2",
        "session 2",
        "session 3",
    ]
    resumed = [Key("a", "c", 3, 0, 1), Key("a", "c", 4, 0, 1)]
    assert [k.prompt_index for k in traffic.whole_sessions(resumed, 2, suite)] == [2, 3, 4]


@pytest.mark.integration
def test_a_multi_turn_run_on_a_real_vllm(tmp_path: Path) -> None:
    """Sessions of 3 turns (the seed suite's first 6 prompts of two classes), baseline against
    n-gram, two rounds, the prefix cache on: every turn after the first carries the
    conversation so far, the verdict's unit is the session, the record recomputes."""
    from click.testing import CliRunner

    from kbgen.cli import cli
    from kbgen.run.folder import RunFolder
    from tests.support import vllm_env
    from tests.support.free_port import free_port

    python = vllm_env.require()
    text = vllm_env.spec_text(
        python,
        free_port(),
        per_class=6,
        max_tokens=16,
        api="chat",
        concurrency=2,
        rounds=2,
        sessions={"turns": 3, "think_s": 0.1},
    )
    spec = yaml.safe_load(text)
    spec["server"]["args"].remove("--no-enable-prefix-caching")
    spec_file = tmp_path / "sessions.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    ran = CliRunner().invoke(cli, ["bench", str(spec_file), "--runs", str(tmp_path / "runs")])
    assert ran.exit_code == 0, ran.output
    folder = RunFolder.open(Path(ran.stdout.strip().splitlines()[-1]))
    samples = [s for s in folder.samples() if s.ok]
    assert len(samples) == 2 * 2 * 12
    by_turn = {(s.variant, s.round, s.prompt_class, s.prompt_index): s for s in samples}
    for (arm, round_, cls, index), s in by_turn.items():
        if index % 3:  # a later turn: the turn before, its answer and its own prompt
            before = by_turn[(arm, round_, cls, index - 1)]
            assert (s.prompt_tokens or 0) > (before.prompt_tokens or 0) + (
                before.output_tokens or 0
            )
            assert s.sent_ns >= (before.done_ns or 0) + 0.1e9
    made = CliRunner().invoke(cli, ["record", str(folder.path), "--records", str(tmp_path / "r")])
    assert made.exit_code == 0, made.output
    path = Path(made.stdout.strip())
    saved = yaml.safe_load(path.read_text())
    assert saved["workload"]["sessions"] == {"turns": 3, "think_s": 0.1}
    assert {c["groups"] for c in saved["verdict"]["per_class"].values()} == {2}  # sessions a class
    checked = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert checked.exit_code == 0, checked.output
