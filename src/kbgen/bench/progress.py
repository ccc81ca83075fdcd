"""Live progress of `kbgen bench` on the terminal; the only module that imports rich.

Shows the wait for a server to become healthy (it may take an hour), then one bar per measurement
window ("round 2/4 · ngram-k3 · concurrency 8"), with finished/failed requests and the live
output rate (tokens of finished requests over the time since the window's first request).
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kbgen import redact
from kbgen.bench.launch import Launched
from kbgen.kb.models import Load
from kbgen.run.models import RunTotals
from kbgen.run.samples import Sample


class RichEvents:
    """bench.Events shown with rich; use as a context manager around the run."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self._tasks: dict[str, Any] = {}
        self._wait_task: Any = None
        self._tokens: dict[str, int] = {}
        self._failed: dict[str, int] = {}
        self._started: dict[str, float] = {}
        self._round = ""  # "round 2/4 · " during an interleaved run

    def round_started(self, round: int, rounds: int) -> None:
        self._round = f"round {round + 1}/{rounds} · "

    def __enter__(self) -> RichEvents:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def waiting(self, variant: str, seconds: float) -> None:
        description = f"starting server for [bold]{variant}[/]"
        if self._wait_task is None:
            self._wait_task = self.progress.add_task(description, total=None, status="")
        self.progress.update(
            self._wait_task,
            description=description,
            status=f"waiting for /health ({seconds:.0f} s)",
        )

    def variant_started(self, variant: str, todo: int, launched: Launched) -> None:
        if self._wait_task is not None:
            self.progress.remove_task(self._wait_task)
            self._wait_task = None
        how = "reused" if launched.reused else "ready"
        if launched.startup_s is not None:
            how += f" after {launched.startup_s:.1f} s"
        self.console.print(f"server for [bold]{variant}[/] {how} at {redact.text(launched.url)}")
        self._tasks[variant] = self.progress.add_task(
            f"{self._round}[bold]{variant}[/]", total=todo, status=""
        )
        self._tokens[variant] = self._failed[variant] = 0
        self._started[variant] = time.monotonic()

    def load_started(self, variant: str, load: Load, todo: int) -> None:
        """A sweep's cell: the window's bar names its load too ("ngram-k3 · concurrency 8")."""
        where = ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in load.items())
        self.progress.update(
            self._tasks[variant], description=f"{self._round}[bold]{variant}[/] · {where}"
        )

    def sample_done(self, sample: Sample) -> None:
        variant = sample.variant
        if sample.ok:
            self._tokens[variant] += sample.output_tokens or 0
        else:
            self._failed[variant] += 1
        elapsed = max(time.monotonic() - self._started[variant], 1e-9)
        status = f"{self._tokens[variant] / elapsed:7.1f} tok/s"
        if self._failed[variant]:
            status += f"  [red]{self._failed[variant]} failed[/]"
        self.progress.update(self._tasks[variant], advance=1, status=status)


def totals_table(totals: RunTotals) -> Table:
    """The run's totals: per variant requests, rate, token cross-check, acceptance."""
    table = Table(title=f"run summary: {totals.spec_id}")
    for column in (
        "variant",
        "ok",
        "failed",
        "output tok/s",
        "tokens client = server",
        "acceptance",
        "mean acc. length",
    ):
        table.add_column(column, justify="right" if column != "variant" else "left")
    for name, v in totals.variants.items():
        spec = next((w.spec_decode for w in v.windows if w.spec_decode is not None), None)
        rate = f"{v.output_tok_s:.1f}" if v.output_tok_s else "-"
        match = {True: "yes", False: "[red]NO[/]", None: "-"}[v.tokens_match]
        acceptance = (
            f"{spec.acceptance_rate:.2f}" if spec and spec.acceptance_rate is not None else "-"
        )
        length = (
            f"{spec.mean_acceptance_length:.2f}"
            if spec and spec.mean_acceptance_length is not None
            else "-"
        )
        table.add_row(
            name, str(v.requests_ok), str(v.requests_failed), rate, match, acceptance, length
        )
    return table


def show(table: Table) -> None:
    Console(stderr=True).print(table)
