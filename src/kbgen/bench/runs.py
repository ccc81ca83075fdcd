"""A run folder, `runs/<run-id>/`: everything one `kbgen bench` measured, kept as it happens.

    spec.yaml             the spec as run (a resume reads this copy, not the original)
    run.json              what ran where: versions, models, launch commands, windows, status
    samples.jsonl         one line per finished request, appended and flushed at once
    metrics/*.prom        /metrics before and after each measurement window
    logs/<variant>.log    the server's output
    summary.json          per-variant totals and the client/server token cross-check

A kill loses nothing that finished: samples are flushed line by line and run.json is replaced
atomically. A line torn by a kill mid-write is ignored on reading and the request is redone;
the next append starts a line of its own after it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from kbgen.bench.samples import Sample
from kbgen.errors import InvalidInput, Problem, UsageError
from kbgen.kb import files


class RunFolder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._samples: TextIO | None = None  # opened on first append

    @classmethod
    def create(cls, root: Path, spec_id: str, spec_text: str, meta: dict[str, Any]) -> RunFolder:
        stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
        path = files.free_path(root, f"{stamp}-{spec_id}")
        (path / "metrics").mkdir(parents=True)
        (path / "logs").mkdir()
        folder = cls(path)
        files.write_atomic(path / "spec.yaml", spec_text.encode())
        folder.write_meta(meta)
        return folder

    @classmethod
    def open(cls, path: Path) -> RunFolder:
        if not (path / "run.json").is_file() or not (path / "spec.yaml").is_file():
            raise UsageError(f"{path}: not a run folder (no run.json and spec.yaml)")
        return cls(path)

    @property
    def spec_path(self) -> Path:
        return self.path / "spec.yaml"

    def log(self, variant: str) -> Path:
        return self.path / "logs" / f"{variant}.log"

    # --- run.json ------------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads((self.path / "run.json").read_text())
        except (OSError, ValueError) as exc:
            raise InvalidInput([Problem(self.path / "run.json", None, "", str(exc))]) from exc
        return data

    def write_meta(self, meta: dict[str, Any]) -> None:
        text = json.dumps(meta, indent=2, sort_keys=False, default=str) + "\n"
        files.write_atomic(self.path / "run.json", text.encode())

    def update_meta(self, **changes: Any) -> dict[str, Any]:
        meta = self.meta()
        meta.update(changes)
        self.write_meta(meta)
        return meta

    # --- samples ---------------------------------------------------------------------------

    def append(self, sample: Sample) -> None:
        if self._samples is None:
            path = self.path / "samples.jsonl"
            self._samples = path.open("a", encoding="utf-8")
            if not _ends_a_line(path):
                self._samples.write("\n")  # a kill tore the last line: leave it on its own
        self._samples.write(sample.model_dump_json(exclude_none=True) + "\n")
        self._samples.flush()  # in the kernel's hands: a killed process loses nothing

    def close(self) -> None:
        if self._samples is not None:
            self._samples.flush()
            os.fsync(self._samples.fileno())
            self._samples.close()
            self._samples = None

    def samples(self) -> list[Sample]:
        """Every complete sample line; a torn last line (a kill mid-write) is skipped."""
        path = self.path / "samples.jsonl"
        if not path.exists():
            return []
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(Sample.model_validate_json(line))
            except ValidationError:
                continue
        return out

    # --- the rest --------------------------------------------------------------------------

    def write_metrics(self, name: str, text: str) -> Path:
        path = self.path / "metrics" / f"{name}.prom"
        files.write_atomic(path, text.encode())
        return path

    def write_summary(self, summary: dict[str, Any]) -> None:
        text = json.dumps(summary, indent=2) + "\n"
        files.write_atomic(self.path / "summary.json", text.encode())


def _ends_a_line(path: Path) -> bool:
    """Whether the file is empty or its last byte ends a line."""
    with path.open("rb") as file:
        if file.seek(0, os.SEEK_END) == 0:
            return True
        file.seek(-1, os.SEEK_END)
        return file.read(1) == b"\n"
