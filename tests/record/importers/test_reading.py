"""Result files read and validated: special files, limits, and every problem at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbgen.errors import InvalidInput
from kbgen.record.importers import IMPORTERS, guidellm, reading, vllm_bench
from tests.support import special
from tests.support.imports import (
    BASE,
)


@pytest.mark.parametrize("kind", sorted(special.SPECIAL))
@pytest.mark.parametrize("tool", sorted(IMPORTERS))
def test_a_special_result_file_is_one_located_line(tmp_path: Path, tool: str, kind: str) -> None:
    path = tmp_path / "results" / "base.json"
    message = special.make(kind, path)
    with special.deadline(5), pytest.raises(InvalidInput) as info:
        IMPORTERS[tool](path, "baseline")
    assert str(info.value).startswith(f"{path}: {message}")


def test_deep_nesting_and_huge_files_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"benchmarks": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(InvalidInput, match=r"deep\.json: not JSON: nested too deeply"):
        guidellm.read(deep, "baseline")
    nested = tmp_path / "nested.json"
    nested.write_text('{"benchmarks": ' + "[" * 500 + "]" * 500 + "}")
    with pytest.raises(InvalidInput, match=r"nested\.json: JSON nesting is deeper than"):
        guidellm.read(nested, "baseline")
    monkeypatch.setattr(reading, "MAX_BYTES", BASE.stat().st_size - 1)
    with pytest.raises(InvalidInput, match=r"too large \([\d,]+ bytes; the limit is"):
        vllm_bench.read(BASE, "baseline")
