"""`kbgen bench`: run an experiment spec against a real server, round by round, arm by arm.

Each (round, arm) of `order` is one measurement window; `--resume` redoes only what has no
successful sample yet. The order and a window's steps: docs/design.md, "The order of the arms".
"""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from kbgen.bench import bodies, effective, machine, provenance, senders, sessions, totals
from kbgen.bench.client import Client, ModelCard, Timeouts
from kbgen.bench.launch import Launched, Launcher, check_environment, launcher_for, why
from kbgen.errors import (
    ClientFailed,
    InvalidInput,
    KbgenError,
    ServerFailed,
    ServerUnreachable,
)
from kbgen.kb.models import Load
from kbgen.kb.problems import located
from kbgen.run import budget, traffic
from kbgen.run.design import Key, Listen, Look, Looked, Step, design_of, plan, steps
from kbgen.run.folder import RunFolder
from kbgen.run.models import (
    Dropped,
    PrefixTexts,
    RunTotals,
    Stopped,
    Traffic,
    VariantRun,
    Window,
)
from kbgen.run.samples import Sample, on_schedule
from kbgen.run.spec import ExperimentSpec, WorkloadSpec, check_requests


class Events(Protocol):
    """What the bench reports as it goes (the CLI shows it; tests may record it)."""

    def round_started(self, round: int, rounds: int) -> None:
        """A round of an interleaved run (`rounds` > 1) begins; `round` counts from 0."""

    def waiting(self, variant: str, seconds: float) -> None: ...

    def variant_started(self, variant: str, todo: int, launched: Launched) -> None: ...

    def load_started(self, variant: str, load: Load, todo: int) -> None:
        """A sweep's load level begins on the running server (after `variant_started`)."""

    def sample_done(self, sample: Sample) -> None: ...


class NoEvents:
    def round_started(self, round: int, rounds: int) -> None: ...
    def waiting(self, variant: str, seconds: float) -> None: ...
    def variant_started(self, variant: str, todo: int, launched: Launched) -> None: ...
    def load_started(self, variant: str, load: Load, todo: int) -> None: ...
    def sample_done(self, sample: Sample) -> None: ...


async def run(
    spec: ExperimentSpec,
    folder: RunFolder,
    events: Events | None = None,
    launcher: Launcher | None = None,
    suite: dict[str, list[str]] | None = None,
    look: Look | None = None,
) -> RunTotals:
    """Measure every request of the plan that has no successful sample yet; return the totals.

    `launcher` replaces the one the spec's server section asks for (tests count its starts);
    `suite` is the spec's prompts as `check_inputs` gave them (read from the folder's spec if
    not); `look` decides, for a spec that stops when decided, whether the run may stop.
    """
    if suite is None:
        suite = check_inputs(spec, folder.spec_path)
    await measure(spec, folder, events or NoEvents(), launcher, suite, look)
    return finish(spec, folder)


async def measure(
    spec: ExperimentSpec,
    folder: RunFolder,
    events: Events,
    launcher: Launcher | None,
    suite: dict[str, list[str]],
    look: Look | None = None,
    listen: Listen | None = None,
) -> None:
    """`run`'s measuring, window by window, without its totals: what a block does on a node."""
    await _Run(spec, folder, events, launcher, suite, look, listen).all_windows()


def finish(spec: ExperimentSpec, folder: RunFolder) -> RunTotals:
    """A measured run's totals and effective settings in summary.json, and the run complete."""
    run_totals = totals.totals(spec, folder)
    for name, variant_totals in run_totals.variants.items():
        settings = effective.of_folder(folder, name)
        if settings is not None:  # left unset for a server with no vLLM log: nothing said
            variant_totals.effective = settings
    folder.write_totals(run_totals)
    folder.update_meta(status="complete", finished=provenance.now())
    return run_totals


def _key(sample: Sample) -> Key:
    return Key(
        sample.variant,
        sample.prompt_class,
        sample.prompt_index,
        sample.repeat,
        sample.round or 0,
        sample.level or 0,
    )


def check_inputs(
    spec: ExperimentSpec, path: Path, folder: RunFolder | None = None, on_nodes: bool = False
) -> dict[str, list[str]]:
    """Everything a run reads before it measures, checked before it writes a byte; the spec's
    prompts by class. The prompt suite (its own problems, or a run that would plan more
    requests than `spec.MAX_REQUESTS`, located in `path`, the spec), and on a resume
    (`folder`) its run.json (every window of its order an arm and a round of the spec) and its
    samples; then the server's `${NAME}`s and masks (`launch.check_environment`, `on_nodes`
    for a cluster's blocks). A spec or folder that fails leaves no trace: nothing changed."""
    if folder is not None:
        rounds, levels = range(spec.workload.rounds), range(len(spec.loads))
        stored = folder.meta().order
        for i, (round_, arm, level) in enumerate(steps(stored)):
            sweep = len(stored[i]) > 2 or len(levels) > 1
            if (
                arm not in spec.variants
                or round_ not in rounds
                or level not in levels
                or (len(stored[i]) != (3 if len(levels) > 1 else 2))
            ):
                parts = "a round, an arm and a load level" if sweep else "a round and an arm"
                shown = ", ".join(map(repr, stored[i]))
                what = f"[{shown}] is not {parts} of {folder.spec_path.name}"
                raise InvalidInput([located(folder.path / "run.json", ["order", i], what)])
        folder.read_samples()
    suite = traffic.suite(spec)  # synthetic or trace texts built on the first server
    check_requests(spec, suite, path)
    check_environment(spec, path, on_nodes)
    return suite


class _Run:
    """One `kbgen bench` invocation over a run folder (a first run or a resume)."""

    def __init__(
        self,
        spec: ExperimentSpec,
        folder: RunFolder,
        events: Events,
        launcher: Launcher | None,
        suite: dict[str, list[str]],
        look: Look | None = None,
        listen: Listen | None = None,
    ) -> None:
        self.spec, self.folder, self.events = spec, folder, events
        self.workload = spec.workload
        self.suite = suite
        self.look = look if design_of(spec.workload) else None
        self.listen = listen if self.look is not None else None
        self.decided = False
        self.dropped = set(folder.meta().dropped)  # a resume keeps who left the race
        self.began = time.monotonic()
        self.launched_at: dict[str, float] = {}  # each arm's latest start, monotonic
        self.texts: PrefixTexts | None = None  # the shared prefixes, once built (`built`)
        self.requests = traffic.of(self.workload, spec.folder)  # synthetic or a trace's
        self.serving: str | None = None  # the arm whose server runs now
        self.attempt = folder.meta().attempts - 1
        self.launcher = launcher or launcher_for(spec.server, spec.folder)
        self.timeouts = Timeouts(
            stall_s=self.workload.stall_timeout_s, request_s=self.workload.request_timeout_s
        )

    async def all_windows(self) -> None:
        done = {_key(s) for s in self.folder.samples() if s.ok}
        planned = steps(self.folder.meta().order)  # a resume keeps the order the run began with
        keys = plan(self.spec, self.suite, planned)
        rounds = self.workload.rounds
        announced = -1
        last: int | None = None  # the round of the last window this invocation measured
        self.pending: set[Step] = {(k.round, k.variant, k.level) for k in keys if k not in done}
        try:
            for begun, (round_, name, level) in enumerate(planned):
                rest = planned[begun:] if round_ != last else []  # a round begins: what it holds
                if self.listen is not None:
                    self.heard(self.listen(), round_)
                if last is not None and (self.decided or (round_ > 0 and self.out_of_time(rest))):
                    self.stop(last, begun, "decided" if self.decided else "minutes")
                    break
                if name in self.dropped:
                    continue
                step = (round_, name, level)
                todo = [k for k in keys if (k.round, k.variant, k.level) == step and k not in done]
                if not todo:
                    continue
                if rounds > 1 and round_ != announced:
                    self.events.round_started(round_, rounds)
                    announced = round_
                await self.window(round_, name, level, todo)
                last = round_
                if self.round_ends(planned[begun + 1 :], round_):
                    self.looked(round_)
        finally:
            await self.launcher.stop()
            self.folder.close()

    def out_of_time(self, rest: list[Step]) -> bool:
        """Whether a stopping run's `max_minutes` (this invocation's; from round 2 on) are spent,
        or would be before the windows left of the round `rest` begins: a round cut short
        measures arms nothing pairs (its baseline last, where the round before began with it)."""
        if self.look is None or self.workload.max_minutes is None:
            return False
        ahead = [s for s in rest if s[0] == rest[0][0] and s[1] not in self.dropped]
        ahead = [s for s in ahead if s in self.pending]
        more = budget.seconds(self.folder.meta(), ahead, self.serving) if ahead else 0.0
        return budget.spent(self.workload.max_minutes, self.began, more)

    def round_ends(self, after: list[Step], round_: int) -> bool:
        """Whether round `round_` is complete once its window just measured is: no window of it
        is left in `after` (the planned windows after that one) for an arm still racing."""
        return not any(s[0] == round_ and s[1] not in self.dropped for s in after)

    def looked(self, round_: int) -> None:
        """Look at the samples so far, at the end of round `round_` (a run that stops when
        decided): note whether every class is decided and the variants that leave the race."""
        if self.look is None or self.decided:
            return
        self.heard(self.look(round_), round_)

    def heard(self, found: Looked, round_: int) -> None:
        """Take what a look found: whether every class is decided, who leaves the race."""
        self.decided = found.decided
        found = Looked(
            found.decided, {n: w for n, w in found.drop.items() if n not in self.dropped}
        )
        if found.drop:
            meta = self.folder.meta()
            new = {n: Dropped(round=round_, why=w) for n, w in found.drop.items()}
            meta.dropped = {**new, **meta.dropped}  # assigned: run.json keeps what is set
            self.folder.write_meta(meta)
            self.dropped |= set(found.drop)

    def stop(self, round_: int, begun: int, reason: str) -> None:
        """Record where the run stopped: in round `round_` (the last it measured), `begun`
        windows of its order begun."""
        meta = self.folder.meta()
        meta.stopped = Stopped.model_validate({"round": round_, "windows": begun, "reason": reason})
        self.folder.write_meta(meta)

    async def window(self, round_: int, name: str, level: int, todo: list[Key]) -> None:
        """One measurement window: `todo`, the requests of arm `name` in round `round_` at load
        level `level` (a sweep's next level reuses the server its arm runs on)."""
        waiting = functools.partial(self.events.waiting, name)
        variant = self.spec.variants[name]
        launched = await self.launcher.start(name, variant, self.folder.log(name), waiting)
        self.serving = name
        workload = self.spec.workload_at(level)
        processes = senders.processes_for(workload.client_processes, workload.concurrency)
        processes = 1 if workload.sessions else processes  # a turn waits for the one before
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(Client(launched.url, timeouts=self.timeouts))
            sender: senders.Sender = senders.InProcess(client)
            if processes > 1:  # started before the window: their start-up is not timed
                sender = await stack.enter_async_context(
                    senders.Processes(launched.url, self.timeouts, processes)
                )
            served = await client.served_model()
            info = await self.started(name, launched, client, served)
            await self.built(client, served.id, workload)
            self.events.variant_started(name, len(todo), launched)
            if len(self.spec.loads) > 1:
                self.events.load_started(name, self.spec.loads[level], len(todo))
            await self.warm_up(client, sender, name, served.id, workload)
            if workload.reset_prefix_cache:  # no window starts warm from another
                await client.reset_prefix_cache()
            measured, failure, client_died = await self.timed(
                client, sender, name, served.id, todo, workload, len(info.windows)
            )
        if self.workload.rounds > 1:  # unset in a run of one round, as on its samples
            measured.round = round_
        if len(self.spec.loads) > 1:  # unset in a run of one load, as on its samples
            measured.level = level
        if processes > 1:  # unset for one: kbgen's own process
            measured.client_processes = processes
        self.kept(name, info, measured)
        if failure:
            raise self.failed(name, failure, client_died)

    async def built(self, client: Client, model: str, workload: WorkloadSpec) -> None:
        """The run's shared prefixes (`self.texts`) and synthetic or trace prompts (into
        `self.suite`): built on the first server from what run.json keeps."""
        meta = self.folder.meta()
        if workload.prefixes is not None and meta.prefixes is None:
            meta.prefixes = await bodies.build(client, model, workload.prefixes, workload.api)
            self.folder.write_meta(meta)
        self.texts = meta.prefixes
        if self.requests is None or any(self.suite[workload.source]):
            return
        if meta.traffic is None:
            rate = traffic.own_rate(self.requests) if workload.trace else None
            counts, added = await bodies.word_tokens(client, model, workload.api)
            meta.traffic = Traffic(
                word_tokens=counts,
                added_tokens=added,
                requests=len(self.requests),
                rate_rps=rate * workload.trace.speedup if rate and workload.trace else None,
            )
            self.folder.write_meta(meta)
        self.suite = {workload.source: traffic.texts_of(workload, self.requests, meta.traffic)}

    async def started(
        self, name: str, launched: Launched, client: Client, served: ModelCard
    ) -> VariantRun:
        """Arm `name`'s run.json entry with this start: its server, engine, model and draft,
        its earlier windows, its start-up times; a timed start kept at once (a start a kill
        cuts short cost too)."""
        earlier = self.folder.meta().variants.get(name)
        startups = [*(earlier.startup_s if earlier else [])]
        ups = [*(earlier.up_s if earlier else [])]
        if launched.startup_s is not None:
            startups.append(launched.startup_s)
            self.launched_at[name] = time.monotonic() - launched.startup_s
            ups.append(launched.startup_s)
        variant = self.spec.variants[name]
        info = VariantRun(
            url=launched.url,
            command=launched.command,
            env=launched.env,
            reused_server=launched.reused,
            engine_version=await client.engine_version(),
            model=served.id,
            max_model_len=served.max_model_len,
            draft=provenance.draft(variant, getattr(earlier, "draft", None), self.spec.folder),
            windows=earlier.windows if earlier else [],
            **({"startup_s": startups} if startups else {}),  # unset: no launch timed
            **({"up_s": ups} if ups else {}),
        )
        if launched.startup_s is not None:
            meta = self.folder.meta()
            meta.variants[name] = info
            self.folder.write_meta(meta)
        return info

    async def timed(
        self,
        client: Client,
        sender: senders.Sender,
        name: str,
        model: str,
        todo: list[Key],
        workload: WorkloadSpec,
        window: int,
    ) -> tuple[Window, str | None, bool]:
        """`todo` measured between two `/metrics` scrapes, the machine's load sampled: the
        window, and why it failed (None: it did not) and whether the client died."""
        self.folder.write_metrics(f"{name}-{window}-before", await client.metrics_text())
        sampler = machine.LoadSampler()
        start_ns = time.perf_counter_ns()
        failure, client_died = await self.measure(client, sender, name, model, todo, workload)
        end_ns = time.perf_counter_ns()
        load = sampler.stop()
        after = None
        with contextlib.suppress(ServerUnreachable):
            self.folder.write_metrics(f"{name}-{window}-after", await client.metrics_text())
            after = f"metrics/{name}-{window}-after.prom"
        measured = Window(
            index=window,
            start_ns=start_ns,
            end_ns=end_ns,
            attempt=self.attempt,
            before=f"metrics/{name}-{window}-before.prom",
            after=after,
            load=load,
        )
        return measured, failure, client_died

    def kept(self, name: str, info: VariantRun, measured: Window) -> None:
        """The window in run.json, and how long arm `name`'s server has served until now."""
        info.windows.append(measured)
        if info.up_s and name in self.launched_at:
            info.up_s[-1] = round(time.monotonic() - self.launched_at[name], 3)
        meta = self.folder.meta()
        meta.variants[name] = info
        self.folder.write_meta(meta)

    def failed(self, name: str, failure: str, client_died: bool) -> KbgenError:
        """The error a failed window raises: what is kept, and how to continue."""
        kept = len([s for s in self.folder.samples() if s.ok])
        where = (
            f"{kept} finished samples are kept in {self.folder.path}. "
            f"Continue with: kbgen bench --resume {self.folder.path}"
        )
        if client_died:
            return ClientFailed(f"variant {name!r}: {failure}; {where}")
        return ServerFailed(
            f"the server stopped answering during variant {name!r} ({failure}): "
            f"{why(self.folder.log(name))}; {where}"
        )

    def round_field(self, round_: int) -> int | None:
        """What samples and windows record as their round: None in a run of one round."""
        return round_ if self.workload.rounds > 1 else None

    async def warm_up(
        self,
        client: Client,
        sender: senders.Sender,
        name: str,
        model: str,
        workload: WorkloadSpec,
    ) -> None:
        """At least one unmeasured request per concurrent slot, sent at once through the
        window's sender (its connections warmed too); all failing stops the run."""
        if not workload.warmup:
            return
        first = workload.classes[0]
        prompts_ = self.suite[first]
        slots = 1 if self.spec.open_loop else workload.concurrency  # open loop: as asked
        count = max(workload.warmup, slots)
        jobs = [
            senders.Job(
                workload.api,
                bodies.payload(workload, model, prompts_[i % len(prompts_)]),
                Sample(
                    variant=name,
                    prompt_class=first,
                    prompt_index=i % len(prompts_),
                    repeat=-1,
                    scheduled_ns=0,
                    sent_ns=0,
                ),
                workload.usage,
            )
            for i in range(count)
        ]
        results: list[Sample] = []

        async def done(sample: Sample) -> bool:
            results.append(sample)
            return True

        await sender.send(jobs, count, done)
        if not any(r.ok for r in results):
            raise ServerFailed(
                f"every warm-up request to variant {name!r} failed: "
                f"{results[0].error}; server log: {self.folder.log(name)}"
            )

    async def measure(
        self,
        client: Client,
        sender: senders.Sender,
        name: str,
        model: str,
        todo: list[Key],
        workload: WorkloadSpec,
    ) -> tuple[str | None, bool]:
        """Send `todo` at the level's concurrency (open loop: each at its time, the level's
        arrivals from now), appending each sample as it finishes.

        Returns why it stopped early (the server died or stopped answering, or a client
        process died: then True), or None.
        """
        failure: list[str] = []
        levels = len(self.spec.loads)
        prefixes = workload.prefixes
        turns = workload.sessions.turns if workload.sessions else None
        if turns is not None:  # whole sessions: a resumed one again from its first turn
            todo = traffic.whole_sessions(todo, turns, self.suite)

        def prompt_of(key: Key) -> str:
            return self.suite[key.prompt_class][key.prompt_index]

        def tokens_out(key: Key) -> int | None:
            return self.requests[key.prompt_index].output_tokens if self.requests else None

        drawn = [bodies.drawn(prefixes, self.texts, k.prompt_class, k.prompt_index) for k in todo]
        jobs = [
            senders.Job(
                workload.api,
                bodies.payload(workload, model, prompt_of(key), text, tokens_out(key)),
                Sample(
                    variant=name,
                    prompt_class=key.prompt_class,
                    prompt_index=key.prompt_index,
                    prefix=prefix,
                    repeat=key.repeat,
                    round=self.round_field(key.round),
                    level=key.level if levels > 1 else None,
                    attempt=self.attempt,
                    scheduled_ns=0,
                    sent_ns=0,
                ),
                workload.usage,
            )
            for key, (prefix, text) in zip(todo, drawn, strict=True)
        ]
        keys = [(k.prompt_class, k.prompt_index, k.repeat) for k in todo]
        chats = traffic.sessions(keys, turns) if turns else [[i] for i in range(len(todo))]
        sent = [(todo[chat[0]].prompt_index, todo[chat[0]].repeat) for chat in chats]
        due = traffic.due(workload, self.requests, sent, todo[0].round, todo[0].level)
        if due is not None:  # the same times for every arm of the round; a session's its first's
            start = time.perf_counter_ns()
            at = {
                i: start + round(s * 1e9) for chat, s in zip(chats, due, strict=True) for i in chat
            }
            jobs = [
                replace(job, due_ns=at[i], sample=on_schedule(job.sample))
                for i, job in enumerate(jobs)
            ]

        async def done(sample: Sample) -> bool:
            self.folder.append(sample)
            self.events.sample_done(sample)
            if not sample.ok and not (self.launcher.alive() and await client.healthy()):
                failure.append(sample.error or "no reason given")
            return not failure

        try:
            if workload.sessions is None:
                await sender.send(jobs, workload.concurrency, done)
            else:  # from this process: a turn waits for the answer before it
                chatted = [[jobs[i] for i in chat] for chat in chats]
                think = workload.sessions.think_s
                await sessions.send(client, chatted, workload.concurrency, think, done)
        except ClientFailed as exc:
            return str(exc), True
        return (failure[0] if failure else None), False
