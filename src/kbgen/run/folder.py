"""A run folder, `runs/<run-id>/`: everything one `kbgen bench` measured, kept as it happens.

Samples are appended and flushed line by line, run.json is replaced atomically, secrets are
masked on their way in, every file is read inside the folder, and a folder of another `format`
is refused. Its files, format, torn lines and secrets: docs/design.md, "The run folder".
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO, TypeVar

from pydantic import ValidationError

from kbgen import redact
from kbgen.errors import InvalidInput, KbgenError, Problem, UsageError
from kbgen.kb import files, store
from kbgen.kb.models import Model
from kbgen.run.models import FORMAT, RunMeta, RunStatus, RunTotals
from kbgen.run.samples import Sample
from kbgen.run.spec import ExperimentSpec
from kbgen.run.spec import load as load_spec

MAX_SAMPLES_BYTES = 1024 * files.MIB  # about half a million requests of 1,000 tokens each
MAX_METRICS_BYTES = 64 * files.MIB  # a /metrics scrape of vLLM is a few hundred KB
MAX_LOG_BYTES = 1024 * files.MIB  # vLLM logs a line every 10 s: a week of a server is ~30 MB


@dataclass(frozen=True)
class Samples:
    """The samples of a run folder, and the line numbers of torn lines dropped."""

    samples: list[Sample]
    torn: list[int] = field(default_factory=list)


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
        # there at all: a FIFO or a symlink in their place is the reader's to name
        if not all(os.path.lexists(path / name) for name in ("run.json", "spec.yaml")):
            raise UsageError(f"{path}: not a run folder (no run.json and spec.yaml)")
        return cls(path)

    @property
    def spec_path(self) -> Path:
        return self.path / "spec.yaml"

    def spec(self) -> ExperimentSpec:
        """The run's spec, its relative paths read from where its original's were."""
        workdir = self.meta().workdir
        return load_spec(self.spec_path, Path(workdir) if workdir else Path.cwd())

    def log(self, variant: str) -> Path:
        return self.path / "logs" / f"{variant}.log"

    def read_log(self, variant: str) -> str | None:
        """A variant's server log (every launch of it), read inside the folder; None when
        kbgen kept none (a server it did not start)."""
        path = self.log(variant)
        if not os.path.lexists(path):
            return None
        return files.read_regular(path, MAX_LOG_BYTES, self.path).decode(errors="replace")

    def blocks(self) -> list[RunFolder]:
        """The block folders of a run over a cluster, in order (none for a run on one
        machine)."""
        cluster = self.meta().cluster
        return [] if cluster is None else [RunFolder(self.path / b.path) for b in cluster.blocks]

    # --- run.json ------------------------------------------------------------------------

    def meta(self) -> RunMeta:
        """run.json; a folder of a format this kbgen does not read is one problem, at `format`."""
        path = self.path / "run.json"
        data = files.read_json(path, inside=self.path)
        _check_format(path, data)
        return _validated(path, data, RunMeta)

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
        self._samples.write(sample_line(sample))
        self._samples.flush()  # in the kernel's hands: a killed process loses nothing

    def close(self) -> None:
        if self._samples is not None:
            self._samples.flush()
            os.fsync(self._samples.fileno())
            self._samples.close()
            self._samples = None

    def samples(self) -> list[Sample]:
        """Every sample; torn lines (a kill mid-write) are dropped (`read_samples`)."""
        return self.read_samples().samples

    def read_samples(self) -> Samples:
        """Every sample, and the torn lines dropped; InvalidInput at any other bad line."""
        path = self.path / "samples.jsonl"
        if not os.path.lexists(path):
            return Samples([])
        return parse_samples(path, files.read_regular(path, MAX_SAMPLES_BYTES, self.path))

    # --- the rest --------------------------------------------------------------------------

    def write_metrics(self, name: str, text: str) -> Path:
        path = self.path / "metrics" / f"{name}.prom"
        files.write_atomic(path, redact.text(text).encode())  # labels name the model
        return path

    def read_metrics(self, relative: str) -> tuple[Path, str]:
        """A `/metrics` snapshot named in run.json (relative to the folder): its path and text
        (`bench.metrics` parses it)."""
        path = self.path / relative
        if not os.path.lexists(path):
            message = "the /metrics snapshot that run.json names is missing"
            raise InvalidInput([Problem(path, None, "", message)])
        return path, files.read_regular(path, MAX_METRICS_BYTES, self.path).decode(
            "utf-8", errors="replace"
        )

    def write_totals(self, totals: RunTotals) -> None:
        files.write_atomic(self.path / "summary.json", _json(totals))

    def read_summary(self) -> bytes:
        """summary.json's bytes, read inside the folder."""
        return files.read_regular(self.path / "summary.json", MAX_METRICS_BYTES, self.path)


def sample_line(sample: Sample) -> str:
    """A sample as samples.jsonl keeps it: one line of JSON, its error's secrets masked."""
    if sample.error:  # a server's error message may quote what it was sent
        sample = sample.model_copy(update={"error": redact.text(sample.error)})
    return sample.model_dump_json(exclude_none=True) + "\n"


def parse_samples(path: Path, data: bytes) -> Samples:
    """The samples of a samples.jsonl's bytes; a line that is not JSON is torn, and dropped,
    only where a kill can leave one — the last line an attempt wrote — and every other bad line
    is a problem at its line."""
    lines: list[tuple[int, Sample | None]] = []  # None: not JSON
    problems: list[Problem] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            lines.append((number, Sample.model_validate_json(line)))
        except ValidationError as exc:
            if any(e["type"] == "json_invalid" for e in exc.errors()):
                lines.append((number, None))
                continue
            from kbgen.kb.problems import problems_of  # its YAML, only when there is a fault

            problems += [replace(p, line=number) for p in problems_of(path, exc)]
    # the attempt of the next sample after each line (None: no sample follows)
    following: list[int | None] = []
    attempt: int | None = None
    for _, sample in reversed(lines):
        following.append(attempt)
        attempt = sample.attempt if sample is not None else attempt
    following.reverse()
    samples, torn = [], []
    before = 0  # the attempt of the last sample so far: a torn line's attempt is no earlier
    for (number, sample), after in zip(lines, following, strict=True):
        if sample is not None:
            samples.append(sample)
            before = sample.attempt
        elif after is None or after > before:
            torn.append(number)
        else:
            message = "not a sample (not JSON), and not where a killed run leaves a torn line"
            problems.append(Problem(path, number, "", message))
    if problems:
        raise InvalidInput(problems)
    return Samples(samples, torn)


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


def _check_format(path: Path, data: dict[str, Any]) -> None:
    """InvalidInput, one problem, unless run.json's `format` is the one this kbgen reads."""
    found = data.get("format")
    if found == FORMAT and type(found) is int:
        return
    if "format" not in data:
        said = "missing: the folder was written by a kbgen from before run-folder formats"
    elif type(found) is int and found < FORMAT:
        said = f"{found}: the folder was written by an older kbgen"
    else:
        said = f"{json.dumps(found)}: not a run-folder format this kbgen knows (a newer kbgen?)"
    message = (
        f"{said}; this kbgen reads format {FORMAT} only: make the record with the kbgen that "
        "wrote the folder, or run the experiment again"
    )
    problem = Problem(path, None, "format", message)
    if "format" in data:
        from kbgen.kb.problems import located  # YAML positions, only when there is a fault

        with contextlib.suppress(KbgenError):
            problem = located(path, ["format"], message)
    raise InvalidInput([problem])


def _validated(path: Path, data: dict[str, Any], model: type[M]) -> M:
    """A JSON file of the run folder as `model`; InvalidInput located at its line and field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        from kbgen.kb import problems, store  # YAML positions, only when there is a fault

        try:
            tree = store.load_document(path).data  # JSON is YAML: its lines are found
        except KbgenError:
            tree = None
        raise InvalidInput(problems.problems_of(path, exc, tree)) from exc
