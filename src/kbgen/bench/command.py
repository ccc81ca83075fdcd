"""`kbgen bench`'s start: the run folder a spec starts, or the one a resume continues."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbgen.bench import blocks, driver, progress, provenance
from kbgen.errors import KbgenError, UsageError
from kbgen.run import design, spec
from kbgen.run.folder import RunFolder
from kbgen.run.models import RunMeta, RunTotals


@dataclass
class Prepared:
    """A run about to be measured: its folder, spec, prompts and metadata."""

    folder: RunFolder
    experiment: spec.ExperimentSpec
    suite: dict[str, list[str]]
    meta: RunMeta


def prepare(
    spec_file: Path | None, resume: Path | None, runs_root: Path, ray: str | None = None
) -> Prepared:
    """A new run folder under `runs_root` for `spec_file` (with `ray`, its blocks' folders in
    it), or the folder `resume` names, marked running again; every input checked before any
    folder exists."""
    if (spec_file is None) == (resume is None):
        raise UsageError("give either a SPEC_FILE or --resume RUN, not both or neither")
    if resume is not None:
        folder = RunFolder.open(resume)
        experiment = folder.spec()
        spread = folder.meta().cluster is not None
        if spread != (ray is not None):
            said = (
                "spread over a Ray cluster: resume it with --ray ADDRESS"
                if spread
                else ("on one machine: resume it without --ray")
            )
            raise UsageError(f"{resume}: the run is {said}")
        if ray is not None:
            blocks.check(experiment)
        attempts = folder.meta().attempts
        suite = driver.check_inputs(experiment, folder.spec_path, folder, ray is not None)
        meta = folder.update_meta(status="running", attempts=attempts + 1)
        return Prepared(folder, experiment, suite, meta)
    assert spec_file is not None
    if not spec_file.exists():  # a FIFO or folder is the spec loader's to name
        raise UsageError(f"{spec_file}: no such file")
    experiment = spec.load(spec_file)
    if ray is not None:
        blocks.check(experiment)
    suite = driver.check_inputs(experiment, spec_file, None, ray is not None)  # no folder yet
    text = spec_file.read_text()
    folder = RunFolder.create(
        runs_root, experiment.id, text, provenance.new_meta(experiment, spec_file)
    )
    if ray is not None:
        blocks.create(folder, experiment, ray)
    return Prepared(folder, experiment, suite, folder.meta())


def execute(
    run: Prepared, ray: str | None, look: design.Look | None, say: Callable[[str], None]
) -> list[RunTotals]:
    """Measure a prepared run: on this machine, its progress shown (its totals); or, with
    `ray`, its blocks over that Ray cluster, `say` told where each runs (each block's totals).
    The folder is marked interrupted or failed where it stops short."""
    try:
        if ray is not None:
            from kbgen.bench import cluster  # Ray, only when asked for

            done = cluster.run(run.experiment, run.folder, ray, run.suite, look, say)
            return [
                RunTotals.model_validate_json((f.path / "summary.json").read_bytes()) for f in done
            ]
        with progress.RichEvents() as events:
            return [
                asyncio.run(driver.run(run.experiment, run.folder, events, None, run.suite, look))
            ]
    except KeyboardInterrupt:
        run.folder.update_meta(status="interrupted")
        raise
    except KbgenError:
        run.folder.update_meta(status="failed")
        raise
