"""`kbgen record --check`: recompute a record's numbers from the samples file beside it.

One located problem per number that differs from what its samples give, so a reviewer can
confirm every figure (measurements, speculative decoding, the verdict, a sweep's cells, best
configurations and front) without the original machine. Records whose figures were reported
or imported as summaries have nothing to recompute.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbgen.errors import InvalidInput, Problem
from kbgen.kb import documents, store
from kbgen.kb.models import Record
from kbgen.kb.problems import located

if TYPE_CHECKING:
    from kbgen.run.design import Design

# what is recomputed: every figure, and of the verdict its outcomes
RECOMPUTED: dict[str, Any] = {
    "measurements": True,
    "by_load": True,
    "spec_decode": True,
    "prefix_cache": True,
    "schedule": True,
    "verdict": {
        "outcome": True,
        "variant": True,
        "load": True,
        "per_class": True,
        "family": True,
        "cells": True,
        "best": True,
        "pareto": True,
        "unit": True,
        "estimator": True,
        "interval": True,
        "reasons": True,
    },
}


# what recomputing reads of a record besides the sections it compares (RECOMPUTED)
READ = ("raw_samples", "hypothesis", "workload", "config")


def inputs(data: dict[str, Any]) -> dict[str, Any]:
    """The parts of a record's plain data that its recomputation reads or compares (the
    verdict's rationale, the author's words, left out): two versions of a record equal here,
    with the same samples, recompute alike."""
    found = {key: data.get(key) for key in (*READ, *RECOMPUTED)}
    if isinstance(found["verdict"], dict):
        found["verdict"] = {k: v for k, v in found["verdict"].items() if k != "rationale"}
    return found


def recompute(path: Path) -> list[Problem]:
    """Recompute a record's numbers from its samples file; one problem per number that differs."""
    record, recomputed = _recomputed(path)
    if not isinstance(recomputed, Record):
        return recomputed  # nothing to recompute (none), or why it cannot be
    expected = recomputed.model_dump(mode="json", exclude_none=True, include=RECOMPUTED)
    actual = record.model_dump(mode="json", exclude_none=True, include=RECOMPUTED)
    differences = [
        difference
        for section in RECOMPUTED
        for difference in _differences([section], expected[section], actual.get(section, {}))
    ]
    tree = store.positions(path) if differences else None  # parsed only to locate them
    return [located(path, loc, message, tree) for loc, message in differences]


def update(path: Path) -> list[str]:
    """Rewrite what a record's samples give, where it differs (the rules a verdict is made by
    changed since it was written), keeping the author's words, comments and the caveats its
    run gave; the sections rewritten, none when it was current or has no samples.

    Raises InvalidInput where the record cannot be recomputed (no samples, a changed file).
    """
    record, recomputed = _recomputed(path)  # once: `recompute` would read it all again
    if record.raw_samples is None:
        return []  # no samples to give anything
    if not isinstance(recomputed, Record) or record.verdict is None or not recomputed.verdict:
        raise InvalidInput(recomputed if isinstance(recomputed, list) else [])
    own = {*(record.verdict.per_class or {}), *(record.config.variants if record.config else {})}
    kept = [c for c in record.verdict.caveats if not _judged(c, own)]  # the run's, not the rule's
    verdict = recomputed.verdict.model_copy(
        update={
            "caveats": list(dict.fromkeys([*kept, *recomputed.verdict.caveats])),
            "rationale": record.verdict.rationale,
        }
    )
    fresh = recomputed.model_copy(update={"verdict": verdict})
    doc = store.load_document(path)
    sections = [s for s in (*RECOMPUTED, "verdict") if s in fresh.model_fields_set]
    updates = fresh.model_dump(mode="json", exclude_none=True, include=set(sections))
    now = record.model_dump(mode="json", exclude_none=True, include=set(sections))
    changed = [
        s for s in updates if now.get(s) != updates[s] and (s in doc.data or updates[s])
    ]  # compared as the model writes them: a default left out is no change
    if not changed:
        return []
    for section in changed:
        doc.data[section] = {}  # replaced whole, in its place
    store.merge(doc.data, {s: updates[s] for s in changed})
    Record.model_validate(store.plain(doc.data))
    store.save(doc)
    return changed


def _judged(caveat: str, own: set[str]) -> bool:
    """Whether a verdict's caveat is one the rule made (about a class, an arm, a cell or the
    best), not one its run gave (the servers' logs, kbgen's commit, a torn line)."""
    head = caveat.split(":", 1)[0].split(",", 1)[0].split(" at ", 1)[0]
    return head in own or caveat.startswith("best ")


def _recomputed(path: Path) -> tuple[Record, Record | list[Problem]]:
    """The record at `path`, and the record as its samples give it now, or where it cannot be
    recomputed the problems that say why (none: nothing to recompute, its figures taken as
    reported or imported as summaries)."""
    # the statistics: imported where a record is recomputed, not where `inputs` are compared
    from kbgen.record import confounds, figures, schedule, verdict
    from kbgen.record.evidence import read_samples, read_samples_file

    record = documents.load_model(path, Record)

    def problem(loc: list[str | int], message: str) -> tuple[Record, list[Problem]]:
        return record, [located(path, loc, message)]

    if (
        record.raw_samples is None
        and record.verdict is not None
        and (record.verdict.method in ("reported", "summary"))
    ):
        return record, []
    if record.raw_samples is None or record.hypothesis is None:
        return problem(["raw_samples"], "no samples to recompute the numbers from")
    samples_path = path.parent / record.raw_samples.path
    if not os.path.lexists(samples_path):
        return problem(["raw_samples", "path"], f"{samples_path} is missing")
    try:  # inside the record's folder: never a byte of a file a symlink leads out to
        packed = read_samples_file(samples_path, path.parent)
    except InvalidInput as exc:
        tree = store.positions(path)
        return record, [
            located(path, ["raw_samples", "path"], p.message, tree) for p in exc.problems
        ]
    digest = hashlib.sha256(packed).hexdigest()
    if record.raw_samples.sha256 and digest != record.raw_samples.sha256:
        return problem(["raw_samples", "sha256"], f"{samples_path.name} does not match it")
    evidence = read_samples(samples_path, packed)
    recomputed = record.model_copy(
        update={
            "measurements": figures.measurements(evidence),
            "by_load": figures.by_load(evidence),
            "spec_decode": figures.spec_decode(evidence),
            "prefix_cache": figures.prefix_cache(evidence),
            "schedule": schedule.kept(evidence),
            "verdict": verdict.judge(
                evidence,
                record.hypothesis,
                [],
                temperature=record.workload.temperature if record.workload else None,
                design=_design(record),
                time_confound_ok=bool(record.workload and record.workload.accept_time_confound),
                refusals=confounds.drafting(record.config.variants, evidence.windows)
                if record.config
                else (),
            ),
        }
    )
    return record, recomputed


def _design(record: Record) -> Design | None:
    """The stopping design a record's run ran with (None: the fixed design)."""
    from kbgen.run.design import design_of

    return None if record.workload is None else design_of(record.workload)


def _differences(
    loc: list[str | int], expected: Any, actual: Any
) -> list[tuple[list[str | int], str]]:
    if isinstance(expected, dict) and isinstance(actual, dict):
        return [
            d
            for key in sorted(set(expected) | set(actual))
            for d in _differences([*loc, key], expected.get(key), actual.get(key))
        ]
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in _differences([*loc, i], e, a)
        ]
    if expected == actual or _close(expected, actual):
        return []
    return [(loc, f"is {actual!r}, but its samples give {expected!r}")]


def _close(a: Any, b: Any) -> bool:
    numbers = (int, float)
    return isinstance(a, numbers) and isinstance(b, numbers) and math.isclose(a, b, rel_tol=1e-9)
