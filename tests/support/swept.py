"""A small knowledge base with a sweep in it: its cells beside A/B records of their questions.

`sweep` (2026-11-10) runs k3 and k5 (the test record's n-gram at 3 and 5 tokens) against the
baseline at concurrency 1 and 8, in coding and math:

| cell          | coding                    | math                      |
|---------------|---------------------------|---------------------------|
| k3 at c1      | supported +30% [+12, +50] | supported +20% [+8, +33]  |
| k5 at c1      | refuted −10% [−20, +2]    | inconclusive +3% [−5, +12] |
| k3 at c8      | refuted −30% [−40, −20]   | refuted −25% [−35, −15]   |
| k5 at c8      | inconclusive 0% [−8, +9]  | inconclusive, no data     |

best: k3 at c1 (0.97), the baseline at c8 (0.61, tied with k5). It resolves
`next-steps#test-ngram`.

- `ab-k5-c1` (2026-11-01): an A/B record of k5 at concurrency 1, refuted in coding: it
  replicates the sweep's k5 at c1;
- `ab-k3-c8` (2026-11-05): an A/B record of k3 at concurrency 8, **supported** in coding: it
  contradicts the sweep's k3 at c8;
- `ab-elsewhere` (2026-11-06): k3 at concurrency 4, a load the sweep did not run: no cell's.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from kbgen.kb.models import Load
from tests.conftest import PLAN, RECORD

BASE: dict[str, Any] = yaml.safe_load(RECORD)
K5: dict[str, Any] = BASE["config"]["variants"]["ngram"]
K3: dict[str, Any] = {
    **K5,
    "speculative_config": {**K5["speculative_config"], "num_speculative_tokens": 3},
}
LOADS: list[Load] = [{"concurrency": 1}, {"concurrency": 8}]
WORKLOAD = {"prompt_suite": "bench/prompts/seed.jsonl", "classes": ["coding", "math"]}


def cls(
    outcome: str, effect: float | None, low: float | None, high: float | None
) -> dict[str, Any]:
    """A class's verdict in a cell or an A/B record; without an effect, one without data."""
    if effect is None:
        return {"outcome": outcome, "reason": "no samples at this load"}
    return {"outcome": outcome, "effect": effect, "ci_low": low, "ci_high": high}


# (variant, concurrency) -> class -> its cell's verdict
CELLS: dict[tuple[str, int], dict[str, dict[str, Any]]] = {
    ("k3", 1): {
        "coding": cls("supported", 0.3, 0.12, 0.5),
        "math": cls("supported", 0.2, 0.08, 0.33),
    },
    ("k5", 1): {
        "coding": cls("refuted", -0.1, -0.2, 0.02),
        "math": cls("inconclusive", 0.03, -0.05, 0.12),
    },
    ("k3", 8): {
        "coding": cls("refuted", -0.3, -0.4, -0.2),
        "math": cls("refuted", -0.25, -0.35, -0.15),
    },
    ("k5", 8): {
        "coding": cls("inconclusive", 0.0, -0.08, 0.09),
        "math": cls("inconclusive", None, None, None),
    },
}
BEST = [
    {"load": {"concurrency": 1}, "variant": "k3", "probability_best": 0.97},
    {"load": {"concurrency": 8}, "variant": "baseline", "probability_best": 0.61, "ties": ["k5"]},
]


def sweep(
    rid: str = "sweep",
    created: str = "2026-11-10",
    cells: dict[tuple[str, int], dict[str, dict[str, Any]]] = CELLS,
    best: list[dict[str, Any]] = BEST,
) -> dict[str, Any]:
    """The sweep record as a plain reader of its YAML sees it."""
    data = copy.deepcopy(BASE)
    data |= {"id": rid, "title": f"n-gram k3 and k5 at two loads ({rid})", "created": created}
    data["concluded"] = created
    data["config"]["variants"] = {"baseline": {}, "k3": K3, "k5": K5}
    data["config"]["sweep"] = {"k.speculative_config.num_speculative_tokens": [3, 5]}
    data["workload"] = {**WORKLOAD, "loads": LOADS}
    del data["measurements"], data["spec_decode"]
    data["verdict"] = {
        "outcome": "supported",
        "variant": "k3",
        "method": "bootstrap",
        "confidence": 0.95,
        "rule": "each cell's simultaneous interval against the minimum effect",
        "per_class": {
            name: {k: v for k, v in said.items() if k != "reason"}
            for name, said in cells[("k3", 1)].items()
        },
        "load": {"concurrency": 1},
        "family": {"method": "bonferroni", "comparisons": 4, "cell_confidence": 0.9875},
        "cells": [
            {"variant": variant, "load": {"concurrency": c}, "class": name, **said}
            for (variant, c), by_class in cells.items()
            for name, said in by_class.items()
        ],
        "best": copy.deepcopy(best),
    }
    data["provenance"] = {"source": "reported"}  # no samples to check
    return data


def a_b(
    rid: str,
    created: str,
    variant: dict[str, Any],
    concurrency: int,
    coding: dict[str, Any],
) -> dict[str, Any]:
    """An A/B record of `variant` at `concurrency`, judged in coding only."""
    data = copy.deepcopy(BASE)
    data |= {"id": rid, "title": f"A/B {rid}", "created": created, "concluded": created}
    data["config"]["variants"]["ngram"] = copy.deepcopy(variant)
    data["workload"] = {**WORKLOAD, "classes": ["coding"], "concurrency": concurrency}
    data["verdict"] |= {"outcome": coding["outcome"], "per_class": {"coding": coding}}
    data["measurements"] = {k: {"coding": v["coding"]} for k, v in data["measurements"].items()}
    data["provenance"] = {"source": "reported"}
    data["resolves"] = []
    return data


REPLICATION = a_b("ab-k5-c1", "2026-11-01", K5, 1, cls("refuted", -0.26, -0.3, -0.2))
CONTRADICTION = a_b("ab-k3-c8", "2026-11-05", K3, 8, cls("supported", 0.09, 0.06, 0.12))
ELSEWHERE = a_b("ab-elsewhere", "2026-11-06", K3, 4, cls("supported", 0.09, 0.06, 0.12))


def knowledge_base(folder: Path) -> Path:
    """The records folder described above, written under `folder`; returned."""
    records = folder / "records"
    (records / "plans").mkdir(parents=True)
    (records / "plans" / "next-steps.yaml").write_text(PLAN)
    for data in (sweep(), REPLICATION, CONTRADICTION, ELSEWHERE):
        (records / f"{data['id']}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return records
