"""`kbgen bench`'s start: the run folder a spec starts, or the one a resume continues."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kbgen.bench import driver, spec
from kbgen.bench.run_models import RunMeta
from kbgen.bench.runs import RunFolder
from kbgen.errors import UsageError


@dataclass
class Prepared:
    """A run about to be measured: its folder, spec, prompts and metadata."""

    folder: RunFolder
    experiment: spec.ExperimentSpec
    suite: dict[str, list[str]]
    meta: RunMeta


def prepare(spec_file: Path | None, resume: Path | None, runs_root: Path) -> Prepared:
    """A new run folder under `runs_root` for `spec_file`, or the folder `resume` names, marked
    running again; every input checked before any folder exists."""
    if (spec_file is None) == (resume is None):
        raise UsageError("give either a SPEC_FILE or --resume RUN, not both or neither")
    if resume is not None:
        folder = RunFolder.open(resume)
        experiment = spec.load(folder.spec_path)
        attempts = folder.meta().attempts
        suite = driver.check_inputs(experiment, folder.spec_path, folder)
        meta = folder.update_meta(status="running", attempts=attempts + 1)
        return Prepared(folder, experiment, suite, meta)
    assert spec_file is not None
    if not spec_file.exists():  # a FIFO or folder is the spec loader's to name
        raise UsageError(f"{spec_file}: no such file")
    experiment = spec.load(spec_file)
    suite = driver.check_inputs(experiment, spec_file)  # before any folder exists
    text = spec_file.read_text()
    folder = RunFolder.create(
        runs_root, experiment.id, text, driver.new_meta(experiment, spec_file)
    )
    return Prepared(folder, experiment, suite, folder.meta())
