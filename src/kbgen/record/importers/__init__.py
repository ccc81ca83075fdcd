"""Results of tools people already run, as evidence for a record: one module per tool.

Each importer reads one result file per variant (`reading`), or a sweep's folder of them, and
returns its samples or its statistics, with notes (`imported`); `levels` then makes a sweep's
steps its load levels, `pairing` and `classes` say which requests sent the same prompt, and of
which class; `setup`, what the record says of its configuration and workload.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kbgen.record.importers import aiperf, guidellm, vllm_bench, vllm_sweep
from kbgen.record.importers.classes import Suite, classify
from kbgen.record.importers.imported import ALL, Imported
from kbgen.record.importers.levels import load_levels
from kbgen.record.importers.pairing import pair_prompts
from kbgen.record.importers.setup import Setup, arms, setup_of


def _vllm_bench(path: Path, variant: str) -> list[Imported]:
    return [vllm_bench.read(path, variant)]


# Each tool's importer of one variant's result file: its results, one per step of a sweep
IMPORTERS: dict[str, Callable[[Path, str], list[Imported]]] = {
    "vllm-bench": _vllm_bench,
    "guidellm": guidellm.read_all,
    "aiperf": aiperf.read,
}
# Each tool's importer of a folder of every variant's results, given the spec's baseline
FOLDERS: dict[str, Callable[[Path, str | None], list[Imported]]] = {
    "vllm-bench-sweep": vllm_sweep.read,
}

__all__ = [
    "ALL",
    "FOLDERS",
    "IMPORTERS",
    "Imported",
    "Setup",
    "Suite",
    "arms",
    "classify",
    "load_levels",
    "pair_prompts",
    "setup_of",
]
