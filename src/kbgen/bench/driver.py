"""`kbgen bench`: run an experiment spec against a real server, variant by variant.

For each variant: bring the server up with the variant's arguments (or reuse it), record what it
is (`/version`, `/v1/models`, the launch command), warm up, scrape `/metrics`, send every prompt
of every class `repeats` times at the spec's concurrency while appending each finished request to
the run folder, scrape `/metrics` again, and cross-check the client's token count against the
server's counter. A server that dies ends the run with a clear error and keeps every finished
sample; `--resume` redoes only what has no successful sample yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kbgen import __version__
from kbgen.bench import metrics, prompts
from kbgen.bench.client import Client, Timeouts
from kbgen.bench.launch import Launched, launcher_for
from kbgen.bench.run_models import RunMeta, RunTotals, VariantRun, VariantTotals, Window
from kbgen.bench.runs import RunFolder
from kbgen.bench.samples import Sample
from kbgen.bench.spec import ExperimentSpec, WorkloadSpec
from kbgen.errors import ServerFailed, ServerUnreachable
from kbgen.kb import git
from kbgen.kb.models import Hardware, baseline_first


@dataclass(frozen=True, order=True)
class Key:
    """One measured request of the plan: which variant, class, prompt and repeat."""

    variant: str
    prompt_class: str
    prompt_index: int
    repeat: int


class Events(Protocol):
    """What the bench reports as it goes (the CLI shows it; tests may record it)."""

    def waiting(self, variant: str, seconds: float) -> None: ...

    def variant_started(self, variant: str, todo: int, launched: Launched) -> None: ...

    def sample_done(self, sample: Sample) -> None: ...


class NoEvents:
    def waiting(self, variant: str, seconds: float) -> None: ...

    def variant_started(self, variant: str, todo: int, launched: Launched) -> None: ...

    def sample_done(self, sample: Sample) -> None: ...


def plan(spec: ExperimentSpec, suite: dict[str, list[str]]) -> list[Key]:
    """Every request to measure, baseline first, then repeat by repeat through the classes."""
    return [
        Key(variant, cls, index, repeat)
        for variant in baseline_first(spec.baseline, spec.variants)
        for repeat in range(spec.workload.repeats)
        for cls in spec.workload.classes
        for index in range(len(suite[cls]))
    ]


def payload(workload: WorkloadSpec, model: str, prompt: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": workload.max_tokens,
        "temperature": workload.temperature,
        "ignore_eos": workload.ignore_eos,
    }
    if workload.seed is not None:
        body["seed"] = workload.seed
    if workload.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def local_hardware() -> Hardware:
    """CPU model and count, and GPUs if nvidia-smi sees any: the machine kbgen runs on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    hardware: dict[str, Any] = {"cpu": cpu, "cpu_count": os.cpu_count(), "host": platform.node()}
    if shutil.which("nvidia-smi"):
        try:
            names = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.split("\n")
            gpus = [n.strip() for n in names if n.strip()]
            if gpus:
                hardware.update(accelerator=gpus[0], count=len(gpus))
        except (OSError, subprocess.SubprocessError):
            pass
    return Hardware(**hardware)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_meta(spec: ExperimentSpec) -> RunMeta:
    """run.json of a new run: nothing measured yet."""
    return RunMeta(
        spec_id=spec.id,
        status="running",
        started=_now(),
        tool=f"kbgen {__version__}",
        git_sha=git.head_sha(Path.cwd()),
        hardware=local_hardware() if spec.server.launcher == "process" else None,
        attempts=1,
        variants={},
    )


async def run(spec: ExperimentSpec, folder: RunFolder, events: Events | None = None) -> RunTotals:
    """Measure every request of the plan that has no successful sample yet; return the totals."""
    await _Run(spec, folder, events or NoEvents()).all_variants()
    run_totals = totals(spec, folder)
    folder.write_totals(run_totals)
    folder.update_meta(status="complete", finished=_now())
    return run_totals


def _key(sample: Sample) -> Key:
    return Key(sample.variant, sample.prompt_class, sample.prompt_index, sample.repeat)


class _Run:
    """One `kbgen bench` invocation over a run folder (a first run or a resume)."""

    def __init__(self, spec: ExperimentSpec, folder: RunFolder, events: Events) -> None:
        self.spec, self.folder, self.events = spec, folder, events
        self.workload = spec.workload
        self.suite = prompts.load(
            Path(self.workload.prompts), self.workload.classes, self.workload.per_class
        )
        self.attempt = folder.meta().attempts - 1
        self.launcher = launcher_for(spec.server)
        self.timeouts = Timeouts(
            stall_s=self.workload.stall_timeout_s, request_s=self.workload.request_timeout_s
        )

    async def all_variants(self) -> None:
        done = {_key(s) for s in self.folder.samples() if s.ok}
        try:
            for name in baseline_first(self.spec.baseline, self.spec.variants):
                todo = [
                    k for k in plan(self.spec, self.suite) if k.variant == name and k not in done
                ]
                if todo:
                    await self.variant(name, todo)
        finally:
            await self.launcher.stop()
            self.folder.close()

    async def variant(self, name: str, todo: list[Key]) -> None:
        launched = await self.launcher.start(
            name,
            self.spec.variants[name],
            self.folder.log(name),
            lambda seconds: self.events.waiting(name, seconds),
        )
        async with Client(launched.url, timeouts=self.timeouts) as client:
            models = await client.get_json("/v1/models")
            model = models["data"][0]["id"]
            earlier = self.folder.meta().variants.get(name)
            info = VariantRun(
                url=launched.url,
                command=launched.command,
                env=launched.env,
                reused_server=launched.reused,
                engine_version=(await client.get_json("/version")).get("version"),
                model=model,
                max_model_len=models["data"][0].get("max_model_len"),
                windows=earlier.windows if earlier else [],
            )
            self.events.variant_started(name, len(todo), launched)
            await self.warm_up(client, name, model)
            window = len(info.windows)
            self.folder.write_metrics(f"{name}-{window}-before", await client.metrics_text())
            start_ns = time.perf_counter_ns()
            failure = await self.measure(client, name, model, todo)
            end_ns = time.perf_counter_ns()
            after = None
            with contextlib.suppress(ServerUnreachable):
                self.folder.write_metrics(f"{name}-{window}-after", await client.metrics_text())
                after = f"metrics/{name}-{window}-after.prom"
        info.windows.append(
            Window(
                index=window,
                start_ns=start_ns,
                end_ns=end_ns,
                attempt=self.attempt,
                before=f"metrics/{name}-{window}-before.prom",
                after=after,
            )
        )
        meta = self.folder.meta()
        meta.variants[name] = info
        self.folder.write_meta(meta)
        if failure:
            kept = len([s for s in self.folder.samples() if s.ok])
            raise ServerFailed(
                f"the server stopped answering during variant {name!r} ({failure}); "
                f"{kept} finished samples are kept in {self.folder.path}; server log: "
                f"{self.folder.log(name)}. Continue with: kbgen bench --resume {self.folder.path}"
            )

    async def warm_up(self, client: Client, name: str, model: str) -> None:
        """At least one unmeasured request per concurrent slot; all failing stops the run."""
        if not self.workload.warmup:
            return
        first = self.workload.classes[0]
        prompts_ = self.suite[first]
        count = max(self.workload.warmup, self.workload.concurrency)
        results = await asyncio.gather(
            *(
                client.stream(
                    self.workload.api,
                    payload(self.workload, model, prompts_[i % len(prompts_)]),
                    Sample(
                        variant=name,
                        prompt_class=first,
                        prompt_index=i,
                        repeat=-1,
                        scheduled_ns=0,
                        sent_ns=0,
                    ),
                    time.perf_counter_ns(),
                )
                for i in range(count)
            )
        )
        if not any(r.ok for r in results):
            raise ServerFailed(
                f"every warm-up request to variant {name!r} failed: "
                f"{results[0].error}; server log: {self.folder.log(name)}"
            )

    async def measure(self, client: Client, name: str, model: str, todo: list[Key]) -> str | None:
        """Send `todo` at the spec's concurrency, appending each sample as it finishes.

        Returns why it stopped early (the server died or stopped answering), or None.
        """
        queue = list(reversed(todo))
        failure: list[str] = []

        async def worker() -> None:
            while queue and not failure:
                key = queue.pop()
                scheduled = time.perf_counter_ns()
                sample = Sample(
                    variant=name,
                    prompt_class=key.prompt_class,
                    prompt_index=key.prompt_index,
                    repeat=key.repeat,
                    attempt=self.attempt,
                    scheduled_ns=scheduled,
                    sent_ns=scheduled,
                )
                body = payload(self.workload, model, self.suite[key.prompt_class][key.prompt_index])
                await client.stream(self.workload.api, body, sample, scheduled)
                self.folder.append(sample)
                self.events.sample_done(sample)
                if not sample.ok and not (self.launcher.alive() and await client.healthy()):
                    failure.append(sample.error or "no reason given")

        await asyncio.gather(*(worker() for _ in range(self.workload.concurrency)))
        return failure[0] if failure else None


def totals(spec: ExperimentSpec, folder: RunFolder) -> RunTotals:
    """Per-variant totals, server counter deltas and the client/server token cross-check."""
    meta = folder.meta()
    samples = folder.samples()
    out = RunTotals(spec_id=spec.id, variants={})
    for name, info in meta.variants.items():
        mine = [s for s in samples if s.variant == name]
        ok = [s for s in mine if s.ok]
        windows = []
        for w in info.windows:
            if not w.after:
                continue
            before = metrics.parse((folder.path / w.before).read_text())
            after = metrics.parse((folder.path / w.after).read_text())
            counted = metrics.window(before, after, info.model)
            in_window = [
                s for s in mine if s.attempt == w.attempt and w.start_ns <= s.sent_ns <= w.end_ns
            ]
            client_tokens = sum(s.output_tokens or 0 for s in in_window)
            counted.client_output_tokens = client_tokens
            counted.tokens_match = counted.generation_tokens == client_tokens
            windows.append(counted)
        duration = sum((w.end_ns - w.start_ns) for w in info.windows) / 1e9
        out.variants[name] = VariantTotals(
            engine_version=info.engine_version,
            model=info.model,
            requests_ok=len({_key(s) for s in ok}),
            requests_failed=len({_key(s) for s in mine if not s.ok} - {_key(s) for s in ok}),
            output_tokens=sum(s.output_tokens or 0 for s in ok),
            window_s=duration,
            output_tok_s=sum(s.output_tokens or 0 for s in ok) / duration if duration else None,
            windows=windows,
            tokens_match=all(w.tokens_match for w in windows) if windows else None,
        )
    return out
