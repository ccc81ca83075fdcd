"""Multi-turn sessions sent as chats: each turn with the conversation so far, a think time apart.

A session's turns are jobs in order. The first is sent when due (open loop) or when a slot
frees (closed loop), each next one `think_s` after the answer before it ended, its messages the
turns so far with the answers this arm's server gave. A failed turn ends its session, its
later turns failed unsent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from kbgen.bench.client import Client
from kbgen.bench.senders import Job, OnDone, in_slots, when_due


async def send(
    client: Client,
    sessions: Sequence[Sequence[Job]],
    concurrency: int,
    think_s: float,
    on_done: OnDone,
) -> None:
    """Send `sessions` in order, `concurrency` at a time, each turn's sample to `on_done`
    (False: no more turns, the ones in flight finishing)."""

    async def one(turns: Sequence[Job]) -> bool:
        history: list[dict[str, Any]] = []
        due = turns[0].due_ns
        for turn, job in enumerate(turns):
            scheduled = await when_due(due, job.sample)
            messages = job.body["messages"]
            asked = [*history, messages[-1]] if history else messages
            reply: list[str] = []
            body = {**job.body, "messages": asked}
            sample = await client.stream(job.api, body, job.sample, scheduled, job.usage, reply)
            if not await on_done(sample):
                return False
            if not sample.ok:  # the session ends, its turns left failed unsent; the others go on
                return await _unsent(turns[turn + 1 :], on_done)
            history = [*asked, {"role": "assistant", "content": "".join(reply)}]
            if due is None:  # closed loop: the think time, then at once
                await asyncio.sleep(think_s)
            else:
                due = (sample.done_ns or time.perf_counter_ns()) + round(think_s * 1e9)
        return True

    await in_slots(sessions, concurrency, one)


async def _unsent(turns: Sequence[Job], on_done: OnDone) -> bool:
    """A failed sample for each turn a failed one left unsent (counted as attempts)."""
    for job in turns:
        why = "not sent: an earlier turn of its session failed"
        if not await on_done(job.sample.model_copy(update={"error": why, "on_schedule": None})):
            return False
    return True
