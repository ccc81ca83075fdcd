"""Results of tools people already run, as evidence for a record: one module per tool.

Each importer reads one result file per variant (`reading`) and returns its samples or its
statistics, with notes (`imported`); `pairing` and `classes` then say which requests sent the
same prompt, and of which class; `setup`, what the record says of its configuration and
workload.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kbgen.record.importers import guidellm, vllm_bench
from kbgen.record.importers.classes import Suite, classify
from kbgen.record.importers.imported import ALL, Imported
from kbgen.record.importers.pairing import pair_prompts
from kbgen.record.importers.setup import Setup, arms, setup_of

IMPORTERS: dict[str, Callable[[Path, str], Imported]] = {
    "vllm-bench": vllm_bench.read,
    "guidellm": guidellm.read,
}

__all__ = [
    "ALL",
    "IMPORTERS",
    "Imported",
    "Setup",
    "Suite",
    "arms",
    "classify",
    "pair_prompts",
    "setup_of",
]
