"""`kbgen record`'s two ways in: a run folder, or other tools' result files (`--from`).

Each composes a record and writes it, into a planned record named with `--into` or as a new
record under a free name (`DATE-SPEC-ID`, then `-2`, `-3`, …): a second record of one run never
clobbers the first.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import re
from pathlib import Path

from pydantic import ValidationError

from kbgen.errors import InvalidInput, UsageError
from kbgen.kb import documents, files
from kbgen.kb.models import VARIANT_PATTERN, Outcome, Record, Status
from kbgen.kb.problems import problems_of
from kbgen.record import compose
from kbgen.record import importers as imports
from kbgen.record.write import write
from kbgen.run.folder import RunFolder
from kbgen.run.spec import ExperimentSpec
from kbgen.run.spec import load as load_spec


def record_run(
    run_path: Path, records: Path, into: Path | None = None, allow_mismatch: bool = False
) -> Path:
    """Turn a run folder into a record: fill `into` (a planned record) or write a new one."""
    run = RunFolder.open(run_path)
    spec = run.spec()
    read = None
    if into is not None:
        planned, read = documents.load_with_document(into, Record)
        if planned.status not in (Status.PLANNED, Status.RUNNING):
            raise UsageError(
                f"{into}: is {planned.status!r}; only a planned or running record is filled in"
            )
        path, hypothesis = into, planned.hypothesis
    else:
        path, hypothesis = _new_path(records, spec.id), None
    try:
        record, evidence = compose.from_run(run, path.stem, allow_mismatch, hypothesis)
    except ValidationError as exc:  # a run folder kbgen cannot make a valid record of
        raise InvalidInput(problems_of(path, exc)) from exc
    return write(path, record, evidence, read, records)


def check(paths: list[Path], update: bool = False) -> list[str]:
    """`kbgen record --check`: every number of the records at `paths` recomputed from its
    samples, InvalidInput naming each that differs; with `update`, what differs rewritten
    instead (`recompute.update`). The lines to print."""
    from kbgen.record import recompute

    if update:
        lines = []
        for path in paths:
            changed = recompute.update(path)
            lines.append(f"{path}: {'updated ' + ', '.join(changed) if changed else 'current'}")
        return lines
    problems = [p for path in paths for p in recompute.recompute(path)]
    if problems:
        raise InvalidInput(problems)
    return [f"ok: every number on {len(paths)} record(s) matches its samples"]


def summary(path: Path) -> list[str]:
    """The record's verdict per class, a line each: outcome, effect, interval, and for an
    inconclusive class what would decide it, as a cost."""
    record = documents.load_model(path, Record)
    lines = []
    for cls, c in (record.verdict.per_class if record.verdict else {}).items():
        interval = "" if c.ci_low is None else f" [{c.ci_low:+.1%}, {c.ci_high:+.1%}]"
        needs = f": {c.reason}" if c.outcome == Outcome.INCONCLUSIVE and c.reason else ""
        if c.prompts_needed and c.unit == "prompt" and c.prompts:
            needs += (
                f"; about {c.prompts_needed - c.prompts} more prompts would decide it "
                f"({c.prompts_needed} a class"
            )
            spent = record.cost
            if spent is not None:
                needs += f": about {spent.minutes_with(c.prompts_needed, c.prompts):.0f} min"
            needs += ")"
        elif c.prompts_needed:
            needs += f"; about {c.prompts_needed} {c.unit or 'unit'}s in all would decide it"
        lines.append(f"{cls}: {c.outcome}, {c.effect:+.1%}{interval}{needs}")
    return lines


def estimate_spec(spec_path: Path | None, resume: Path | None, records: Path) -> list[str]:
    """`kbgen bench SPEC --estimate`: the spec's design costed from the knowledge base in
    `records` (its valid records; none when it has no folder), in lines; starts nothing."""
    from kbgen.bench import provenance
    from kbgen.kb import loading
    from kbgen.record.estimate import estimate
    from kbgen.run import traffic
    from kbgen.run.spec import check_requests

    if spec_path is None or resume is not None:
        raise UsageError("--estimate takes a SPEC_FILE, not --resume")

    spec = load_spec(spec_path)
    w = spec.workload
    suite = traffic.suite(spec)
    check_requests(spec, suite, spec_path)
    hardware = provenance.server_hardware(spec.server)[0] or spec.hardware
    found = loading.load([records]).records.values() if records.is_dir() else []
    planned = estimate(spec, min(len(suite[c]) for c in w.classes), hardware, found)
    accelerators = hardware.count if hardware is not None and hardware.accelerator else None
    return planned.lines(accelerators)


def record_import(
    tool: str,
    pairs: list[str],
    records: Path,
    into: Path | None,
    spec_path: Path | None,
    allow_mismatch: bool = False,
    allow_summary_only: bool = False,
    accept_time_confound: bool = False,
    prompts: Path | None = None,
) -> Path:
    """Import VARIANT=FILE result files of `tool` (a folder tool's one FOLDER of every
    variant's) into a planned record or a new one; with `prompts`, the requests take their
    classes from that prompt file; with `spec_path`, the record takes its variants' settings,
    server arguments and hardware from that spec (and its hypothesis, title and tasks, unless
    filling `into` a planned record)."""
    spec = load_spec(spec_path) if spec_path is not None else None
    if tool in imports.FOLDERS:
        found = _folder(tool, pairs, spec)
    else:
        named = [_named(pair) for pair in pairs]
        imports.arms([name for name, _ in named], spec)  # a variant missing: before reading
        found = [i for name, file in named for i in imports.IMPORTERS[tool](file, name)]
    suite = imports.classify(found, prompts) if prompts is not None else None
    read = None
    resolves: list[str] = []
    tags: list[str] = []
    if into is not None:
        planned, read = documents.load_with_document(into, Record)
        if planned.hypothesis is None:
            raise UsageError(f"{into}: has no hypothesis to decide")
        path, title, hypothesis = into, planned.title, planned.hypothesis
    elif spec is not None:
        path, title, hypothesis = _new_path(records, spec.id), spec.title, spec.hypothesis
        resolves, tags = list(spec.resolves), list(spec.tags)
    else:
        raise UsageError("an import needs a hypothesis: --into a planned record, or --spec")
    try:
        record, evidence = compose.from_imports(
            found,
            path.stem,
            title,
            hypothesis,
            allow_mismatch,
            allow_summary_only,
            resolves=resolves,
            tags=tags,
            suite=suite,
            spec=spec,
            accept_time_confound=accept_time_confound,
        )
    except ValidationError as exc:  # e.g. a variant name that is no slug
        raise InvalidInput(problems_of(path, exc)) from exc
    return write(path, record, evidence, read, records)


def _named(pair: str) -> tuple[str, Path]:
    """A VARIANT=FILE argument: the variant's name, and its file."""
    name, sep, file = pair.partition("=")
    if not sep or not name or not file:
        raise UsageError(f"{pair!r}: write each result file as VARIANT=FILE")
    if not re.fullmatch(VARIANT_PATTERN, name):  # it names the record's arms, as a spec's do
        raise UsageError(
            f"{name!r}: a variant name is lower-case letters, digits and inner hyphens "
            "or underscores"
        )
    return name, Path(file)


def _folder(tool: str, targets: list[str], spec: ExperimentSpec | None) -> list[imports.Imported]:
    """The results in a folder tool's one FOLDER; UsageError unless its variants are the
    spec's (where one is given)."""
    if len(targets) != 1 or not Path(targets[0]).is_dir():
        raise UsageError(
            f"--from {tool} takes one FOLDER, the experiment folder the tool wrote "
            f"(got {' '.join(targets)})"
        )
    found = imports.FOLDERS[tool](Path(targets[0]), spec.baseline if spec else None)
    names = list(dict.fromkeys(i.variant for i in found))
    if spec is not None and sorted(names) != sorted(spec.variants):
        raise UsageError(
            f"{targets[0]}: its variants ({', '.join(names)}) are not the spec's "
            f"({', '.join(spec.variants)})"
        )
    return found


def _new_path(records: Path, spec_id: str) -> Path:
    """The first name free in `records` that no file below it has and whose samples file does
    not exist (another record's, it may be): `kbgen validate` finds the id unique."""
    taken = {path.stem for path in files.iter_yaml_files([records])} if records.is_dir() else set()
    stem = f"{dt.date.today().isoformat()}-{spec_id}"
    names = (records / f"{stem}{suffix}.yaml" for suffix in itertools.chain([""], files.numbered()))
    return next(
        path
        for path in names
        if path.stem not in taken
        and not os.path.lexists(path)
        and not os.path.lexists(records / f"{path.stem}{compose.SAMPLES_SUFFIX}")
    )
