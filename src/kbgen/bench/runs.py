"""A run folder, `runs/<run-id>/`: everything one `kbgen bench` measured, kept as it happens.

    spec.yaml             the spec as run, secrets masked (a resume reads this copy)
    run.json              what ran where: versions, models, launch commands, windows, status
    samples.jsonl         one line per finished request, appended and flushed at once
    metrics/*.prom        /metrics before and after each measurement window
    logs/<variant>.log    the server's output
    summary.json          per-variant totals and the client/server token cross-check

The two JSON files are read and written as `bench.run_models`' models; a file that does not
fit them is an InvalidInput located at its line and field.

No secret is written here (`kbgen.redact`): the spec copy, the JSON files, the error of a failed
sample and the `/metrics` text are masked on their way in; the launchers mask the logs. A secret
the spec writes out in full is therefore not in the copy, and a resume cannot send it: a spec
that is to be resumed takes its secrets from the environment, as `${NAME}` references, which are
copied as they are (`launch.check_environment` refuses a resume that would send a mask).

A kill loses nothing that finished: samples are flushed line by line and run.json is replaced
atomically. A line torn by a kill mid-write is ignored on reading and the request is redone;
the next append starts a line of its own after it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import TextIO, TypeVar

from pydantic import ValidationError

from kbgen import redact
from kbgen.bench.run_models import RunMeta, RunStatus, RunTotals
from kbgen.bench.samples import Sample
from kbgen.errors import InvalidInput, KbgenError, UsageError
from kbgen.kb import files, store
from kbgen.kb.models import Model


class RunFolder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._samples: TextIO | None = None  # opened on first append

    @classmethod
    def create(cls, root: Path, spec_id: str, spec_text: str, meta: RunMeta) -> RunFolder:
        stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
        path = files.free_path(root, f"{stamp}-{spec_id}")
        (path / "metrics").mkdir(parents=True)
        (path / "logs").mkdir()
        folder = cls(path)
        files.write_atomic(path / "spec.yaml", _redacted_spec(spec_text).encode())
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

    def meta(self) -> RunMeta:
        return _read(self.path / "run.json", RunMeta)

    def write_meta(self, meta: RunMeta) -> None:
        files.write_atomic(self.path / "run.json", _json(meta))

    def update_meta(
        self, status: RunStatus, attempts: int | None = None, finished: str | None = None
    ) -> RunMeta:
        """run.json with a new status (and attempt count, finish time), written back."""
        meta = self.meta()
        meta.status = status
        if attempts is not None:
            meta.attempts = attempts
        if finished is not None:
            meta.finished = finished
        self.write_meta(meta)
        return meta

    # --- samples ---------------------------------------------------------------------------

    def append(self, sample: Sample) -> None:
        if self._samples is None:
            path = self.path / "samples.jsonl"
            self._samples = path.open("a", encoding="utf-8")
            if not files.ends_a_line(path):
                self._samples.write("\n")  # a kill tore the last line: leave it on its own
        if sample.error:  # a server's error message may quote what it was sent
            sample = sample.model_copy(update={"error": redact.text(sample.error)})
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
        files.write_atomic(path, redact.text(text).encode())  # labels name the model
        return path

    def write_totals(self, totals: RunTotals) -> None:
        files.write_atomic(self.path / "summary.json", _json(totals))


M = TypeVar("M", bound=Model)


def _json(model: Model) -> bytes:
    """The model as the run folder keeps it: what is set, in field order, indented, no secret
    (a server's URL, its command line, the model name it reports)."""
    data = redact.data(model.model_dump(exclude_unset=True))
    return (json.dumps(data, indent=2) + "\n").encode()


def _redacted_spec(text: str) -> str:
    """The spec's text with its secrets masked; the text itself when it has none."""
    tree = store.parse_text(text)
    plain = store.plain(tree)
    masked = redact.data(plain)
    if masked is plain:
        return text
    store.merge(tree, masked)  # comments and key order kept
    return store.dump(tree)


def _read(path: Path, model: type[M]) -> M:
    """A JSON file of the run folder as `model`; InvalidInput located at its line and field."""
    data = files.read_json(path)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        from kbgen.kb import problems, store  # YAML positions, only when there is a fault

        try:
            tree = store.load_document(path).data  # JSON is YAML: its lines are found
        except KbgenError:
            tree = None
        raise InvalidInput(problems.problems_of(path, exc, tree)) from exc
