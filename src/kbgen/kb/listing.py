"""`kbgen list`: the knowledge base as lines of text, every record and plan or the stale ones."""

from __future__ import annotations

from kbgen.kb import replications
from kbgen.kb.cards import Card
from kbgen.kb.loading import KnowledgeBase

HEADER = ("ID", "STATUS", "VERDICT", "TITLE")


def table(base: KnowledgeBase) -> list[str]:
    """A row per record, newest first, in aligned columns under a header; a line per plan."""
    rows = [
        (r.id, str(r.status), str(r.verdict.outcome) if r.verdict else "-", r.title)
        for r in sorted(base.records.values(), key=lambda r: (r.created, r.id), reverse=True)
    ]
    widths = [max(len(row[i]) for row in [HEADER, *rows]) for i in range(3)]
    lines = [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)), row[3]])
        for row in [HEADER, *rows]
    ]
    plans = sorted(base.plans.values(), key=lambda p: p.id)
    return lines + [f"plan {p.id}: {p.title} ({len(p.tasks)} tasks)" for p in plans]


def stale(base: KnowledgeBase) -> list[str]:
    """A line per record whose evidence is stale: its id, why, and its file."""
    found = replications.evidence(Card.of(r) for r in base.records.values()).stale
    return [
        f"{record_id}  {old.said()}  ({base.path_of(base.records[record_id])})"
        for record_id, old in sorted(found.items())
    ]
