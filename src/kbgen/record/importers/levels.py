"""The load levels of an imported sweep: each file's step of the tool's sweep, and its load.

A level is one step, the same in every arm; its load is what the files say the requests were
sent at where that varies between steps, and a step whose arms were sent different loads is
its `sweep_step` alone. See docs/design.md, "Sweeps of other tools".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from kbgen.errors import InvalidInput, Problem
from kbgen.kb.models import Load
from kbgen.record.importers.imported import Imported

# the settings a file states (`Imported.said`) that a load level may set, in the record's order
LOADS: tuple[Literal["concurrency", "request_rate", "max_tokens"], ...] = (
    "concurrency",
    "request_rate",
    "max_tokens",
)


def load_levels(found: list[Imported]) -> tuple[list[Load], list[str]]:
    """The load levels of the imports `found`, in step order (`[{}]` for one step), and the
    notes on the steps whose arms were sent different loads. Each import and its samples get
    their level and round; the settings that vary by level are stated as the first level's,
    as a record's workload states them (`by_load` gives every level). InvalidInput where the
    arms did not run the same sweep."""
    rounds = any(i.round for i in found)  # one run is no round
    for imported in found:
        imported.round = imported.round if rounds else None
        for s in imported.samples:
            s.round = imported.round
    steps = sorted({i.step for i in found if i.step is not None})
    if len(steps) < 2:  # a sweep of one step is one load
        return [Load()], []
    _same_sweep(found, steps)
    varying = [k for k in LOADS if len({_key(i.said.get(k)) for i in found}) > 1]
    loads: list[Load] = []
    notes = []
    for step in steps:
        here = [i for i in found if i.step == step]
        load: Load = {}
        differ = [k for k in varying if len({_key(i.said.get(k)) for i in here}) > 1]
        for k in varying:
            if k not in differ and (value := here[0].said.get(k)) is not None:
                load[k] = value
        if differ:
            arms = {i.variant: _words(i.said, differ) for i in here}
            notes.append(
                f"sweep step {step}: the arms were sent different loads ("
                + "; ".join(f"{v} {said}" for v, said in arms.items())
                + "): its cells compare no arms"
            )
            load = {"sweep_step": step}
        loads.append(load)
    for step, load in zip(steps, loads, strict=True):
        if loads.count(load) > 1:
            raise InvalidInput(
                [
                    Problem(
                        _source(found[0]),
                        None,
                        "",
                        f"sweep step {step}: the same load as another step "
                        f"({_words(dict(load), list(load)) or 'no load stated'}): each step of a "
                        "sweep is a load of its own",
                    )
                ]
            )
    for k in varying:
        first = {_key(i.said.get(k)) for i in found if i.step == steps[0]}
        value = next(i.said.get(k) for i in found if i.step == steps[0])
        for imported in found:
            imported.said[k] = value if len(first) == 1 else None
    for imported in found:
        imported.level = steps.index(imported.step) if imported.step is not None else None
        for s in imported.samples:
            s.level = imported.level
    return loads, notes


def _same_sweep(found: list[Imported], steps: list[int]) -> None:
    """InvalidInput unless every arm has results at every step, of the same kind."""
    kinds: dict[int, tuple[str, str | None]] = {}
    for imported in found:
        have = {i.step for i in found if i.variant == imported.variant}
        missing = [str(step) for step in steps if step not in have]
        message = ""
        if None in have:
            message = f"results of one load, where the other arms ran a sweep of {len(steps)} steps"
        elif missing:
            message = f"no results at sweep step {', '.join(missing)}, where another arm has some"
        elif imported.step is not None:
            variant, kind = kinds.setdefault(imported.step, (imported.variant, imported.step_kind))
            if kind != imported.step_kind:
                message = (
                    f"sweep step {imported.step} is {imported.step_kind}, but {variant}'s is {kind}"
                )
        if message:
            raise InvalidInput(
                [
                    Problem(
                        _source(imported),
                        None,
                        "",
                        f"{imported.variant}: {message}: every arm runs the same sweep",
                    )
                ]
            )


def _source(imported: Imported) -> Path:
    return imported.source or Path(imported.variant)


def _key(value: Any) -> str:
    return json.dumps(value)


def _words(said: dict[str, Any], keys: Sequence[str]) -> str:
    """Settings as a record's notes write them: `request rate 14.2949`."""
    return ", ".join(
        f"{k.replace('_', ' ')} {f'{v:.6g}' if isinstance(v, float) else v}"
        for k in keys
        if (v := said.get(k)) is not None
    )
