"""A small knowledge base whose records disagree: one question asked three times, one other.

- `first` (2026-11-01, vLLM 0.32.0): coding refuted, −26% [−30% … −20%];
- `replication` (2026-11-05, vLLM 0.32.0): the same setup, refuted again, −23% [−28% … −18%];
- `contradiction` (2026-11-10, vLLM 0.33.0): the same setup, **supported**, +9% [+6% … +12%],
  and it resolves `next-steps#test-ngram` as `first` does;
- `elsewhere`: the same hypothesis on another model: a question of its own.

So `first` and `replication` replicate each other, each contradicts `contradiction` (supported
vs refuted, and intervals apart), and both are stale (measured on an older vLLM).
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import PLAN, RECORD

VERDICT = "    coding: {outcome: refuted, effect: -0.26, ci_low: -0.3, ci_high: -0.2}"
CONTRADICTIONS = {("first", "contradiction"), ("replication", "contradiction")}


def record(rid: str, created: str, *, effect: str = VERDICT, version: str = "0.32.0") -> str:
    text = RECORD.replace("id: ngram-test", f"id: {rid}").replace(VERDICT, effect)
    text = text.replace("created: 2026-11-01", f"created: {created}")
    text = text.replace("concluded: 2026-11-02", f"concluded: {created}")
    text = text.replace("version: 0.32.0", f"version: {version}")
    return text.replace("source: measured", "source: reported")  # no samples to check


def knowledge_base(folder: Path) -> Path:
    """The records folder described above, written under `folder`; returned."""
    records = folder / "records"
    (records / "plans").mkdir(parents=True)
    (records / "plans" / "next-steps.yaml").write_text(PLAN)
    (records / "first.yaml").write_text(record("first", "2026-11-01"))
    replication = "    coding: {outcome: refuted, effect: -0.23, ci_low: -0.28, ci_high: -0.18}"
    (records / "replication.yaml").write_text(
        record("replication", "2026-11-05", effect=replication)
    )
    supported = "    coding: {outcome: supported, effect: 0.09, ci_low: 0.06, ci_high: 0.12}"
    text = record("contradiction", "2026-11-10", effect=supported, version="0.33.0")
    (records / "contradiction.yaml").write_text(
        text.replace("outcome: refuted", "outcome: supported")
    )
    elsewhere = record("elsewhere", "2026-11-03").replace("{name: tiny}", "{name: other-model}")
    (records / "elsewhere.yaml").write_text(elsewhere)
    return records
