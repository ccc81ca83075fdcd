"""The run folder: made with a free name, reopened, its run.json and samples kept across kills."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import types
from pathlib import Path
from typing import Any

import pytest

from kbgen.errors import InvalidInput, UsageError
from kbgen.run import folder as runs
from kbgen.run.folder import RunFolder
from kbgen.run.models import RunMeta
from kbgen.run.samples import Sample
from tests.conftest import REPO
from tests.support import special

SPEC_TEXT = "schema_version: 1\nid: ngram-vs-baseline\n"


def a_meta(**changes: Any) -> RunMeta:
    """What bench.provenance.new_meta makes for a new run."""
    return RunMeta.model_validate({**A_META, **changes})


A_META: dict[str, Any] = {  # run.json of a new run: what bench.provenance.new_meta always writes
    "format": 1,
    "spec_id": "ngram-vs-baseline",
    "status": "running",
    "started": "2025-01-02T03:04:05+00:00",
    "tool": "kbgen 0.1.0",
    "kbgen": {"version": "0.1.0"},
    "git_sha": None,
    "hardware": None,
    "prompt_suite": "bench/prompts/seed.jsonl",
    "attempts": 1,
    "variants": {},
    "order": [[0, "baseline"], [0, "ngram"]],
}


A_VARIANT: dict[str, Any] = {  # a variant's entry, as bench.driver writes it
    "url": "http://127.0.0.1:8000",
    "command": [],
    "env": {},
    "reused_server": False,
    "engine_version": "0.32.0",
    "model": "m",
    "max_model_len": 2048,
    "windows": [],
}


def sample(index: int, error: str | None = None) -> Sample:
    return Sample(
        variant="ngram",
        prompt_class="coding",
        prompt_index=index,
        repeat=0,
        scheduled_ns=1_000 + index,
        sent_ns=2_000 + index,
        chunk_ns=[3_000, 4_000],
        chunk_tokens=[1, 3],
        done_ns=5_000,
        prompt_tokens=68,
        output_tokens=4,
        error=error,
    )


@pytest.fixture
def frozen_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """run.folder sees one fixed `datetime.now()`: every folder gets the same stamp."""

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Frozen:
            return cls(2025, 1, 2, 3, 4, 5, tzinfo=tz)

    monkeypatch.setattr(runs, "dt", types.SimpleNamespace(datetime=Frozen))


def test_create_makes_the_folder_with_the_spec_and_meta(tmp_path: Path, frozen_now: None) -> None:
    folder = RunFolder.create(tmp_path / "runs", "ngram-vs-baseline", SPEC_TEXT, a_meta())
    assert folder.path == tmp_path / "runs" / "20250102T030405-ngram-vs-baseline"
    assert folder.spec_path.read_text() == SPEC_TEXT
    assert folder.meta() == a_meta()
    assert json.loads((folder.path / "run.json").read_text()) == A_META
    assert folder.samples() == []
    assert folder.log("ngram").parent.is_dir()
    assert folder.write_metrics("ngram-0-before", "# HELP x y\n").read_text() == "# HELP x y\n"


def test_a_second_run_in_the_same_second_gets_a_free_name(tmp_path: Path, frozen_now: None) -> None:
    names = [RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta()).path.name for _ in range(3)]
    assert names == ["20250102T030405-s", "20250102T030405-s-2", "20250102T030405-s-3"]


def test_open_reads_what_create_wrote(tmp_path: Path) -> None:
    created = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    created.append(sample(0))
    created.close()
    opened = RunFolder.open(created.path)
    assert opened.path == created.path
    assert opened.meta() == a_meta()
    assert opened.samples() == [sample(0)]
    assert opened.spec_path.read_text() == SPEC_TEXT


@pytest.mark.parametrize("missing", ["run.json", "spec.yaml", "both"])
def test_open_refuses_a_folder_that_is_not_a_run(tmp_path: Path, missing: str) -> None:
    path = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta()).path
    for name in ["run.json", "spec.yaml"] if missing == "both" else [missing]:
        (path / name).unlink()
    with pytest.raises(UsageError, match=r"not a run folder"):
        RunFolder.open(path)


@pytest.mark.parametrize("name", ["run.json", "spec.yaml"])
@pytest.mark.parametrize("kind", sorted(special.SPECIAL))
def test_a_resume_of_a_run_whose_file_is_special_is_one_located_line(
    tmp_path: Path, name: str, kind: str
) -> None:
    from click.testing import CliRunner

    from kbgen.cli import cli
    from tests.support.runs import make_run

    path = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0})
    (path / name).unlink()
    message = special.make(kind, path / name)
    with special.deadline(5):
        result = CliRunner().invoke(cli, ["bench", "--resume", str(path)])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0].startswith(f"{path / name}: {message}")


def test_meta_round_trips_and_update_merges(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    changed = a_meta(status="complete", attempts=2)
    folder.write_meta(changed)
    assert RunFolder.open(folder.path).meta() == changed
    merged = folder.update_meta(status="interrupted")
    assert merged == a_meta(status="interrupted", attempts=2)
    assert folder.meta() == merged
    finished = folder.update_meta(status="complete", attempts=3, finished="2025-01-02T04:00:00")
    on_disk = json.loads((folder.path / "run.json").read_text())
    assert on_disk == {**A_META, "status": "complete", "attempts": 3, "finished": finished.finished}
    assert list(on_disk) == [name for name in RunMeta.model_fields if name in on_disk]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"spec_id": ', r"run\.json:1: not JSON: Expecting value"),
        ("[1, 2]", r"run\.json:1: expected a JSON object"),
        (
            json.dumps({**A_META, "attempts": "two"}, indent=2),
            r"run\.json:13: attempts: Input should be a valid integer",
        ),
        (
            json.dumps({**A_META, "status": "paused"}, indent=2),
            r"run\.json:4: status: Input should be 'running', 'complete'",
        ),
        (
            json.dumps({**A_META, "variants": {"a": {**A_VARIANT, "model": 3}}}, indent=2),
            r"run\.json:21: variants\.a\.model: Input should be a valid string$",
        ),
        (
            json.dumps({k: v for k, v in A_META.items() if k != "tool"}, indent=2),
            r"run\.json:1: tool: required field is missing",
        ),
    ],
    ids=["torn", "not-an-object", "wrong-type", "unknown-status", "nested", "missing"],
)
def test_a_broken_run_json_is_invalid_input_at_its_line_and_field(
    tmp_path: Path, text: str, match: str
) -> None:
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    (folder.path / "run.json").write_text(text)
    with pytest.raises(InvalidInput, match=match) as info:
        folder.meta()
    assert str(info.value).startswith(str(folder.path / "run.json"))


@pytest.mark.parametrize(
    ("format", "line", "said"),
    [
        (None, "", "missing: the folder was written by a kbgen from before run-folder formats"),
        (0, ":2", "0: the folder was written by an older kbgen"),
        (2, ":2", "2: not a run-folder format this kbgen knows (a newer kbgen?)"),
        ("1", ":2", '"1": not a run-folder format this kbgen knows (a newer kbgen?)'),
        (True, ":2", "true: not a run-folder format this kbgen knows (a newer kbgen?)"),
    ],
    ids=["missing", "older", "newer", "a-string", "a-boolean"],
)
def test_a_folder_of_another_format_is_refused_in_one_line(
    tmp_path: Path, format: object, line: str, said: str
) -> None:
    """Before anything else is read: an old folder would fail on fields it never had."""
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    written = {**A_META, "format": format} if format is not None else A_META
    old = {k: v for k, v in written.items() if format is not None or k != "format"}
    del old["kbgen"], old["order"]  # what an older folder lacks: no problem of its own
    (folder.path / "run.json").write_text(json.dumps(old, indent=2))
    with pytest.raises(InvalidInput) as info:
        folder.meta()
    assert str(info.value) == (
        f"{folder.path / 'run.json'}{line}: format: {said}; this kbgen reads format 1 only: make "
        "the record with the kbgen that wrote the folder, or run the experiment again"
    )


def test_samples_are_readable_as_soon_as_appended(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    folder.append(sample(0))
    assert RunFolder.open(folder.path).samples() == [sample(0)]  # flushed, not yet closed
    folder.append(sample(1, error="stalled"))
    folder.close()
    folder.close()  # twice is harmless
    folder.append(sample(2))  # appends again after a close
    folder.close()
    assert folder.samples() == [sample(0), sample(1, error="stalled"), sample(2)]


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    folder.append(sample(0))
    folder.append(sample(1))
    folder.close()
    whole = (folder.path / "samples.jsonl").read_bytes()
    for cut in (1, 20, len(sample(1).model_dump_json(exclude_none=True))):
        (folder.path / "samples.jsonl").write_bytes(whole[: len(whole) - 1 - cut])
        assert RunFolder.open(folder.path).samples() == [sample(0)], cut


def test_a_resume_after_a_torn_line_keeps_its_first_sample(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    folder.append(sample(0))
    folder.close()
    with (folder.path / "samples.jsonl").open("a") as samples:
        samples.write(sample(1).model_dump_json()[:30])  # killed mid-write
    resumed = RunFolder.open(folder.path)
    again = sample(2).model_copy(update={"attempt": 1})  # the resume is the next attempt
    resumed.append(again)
    resumed.close()
    assert resumed.read_samples() == runs.Samples([sample(0), again], torn=[2])
    lines = (folder.path / "samples.jsonl").read_text().split("\n")
    assert lines == [
        sample(0).model_dump_json(exclude_none=True),
        sample(1).model_dump_json()[:30],
        again.model_dump_json(exclude_none=True),
        "",
    ]


def test_appends_after_a_close_add_no_blank_line(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    for index in range(3):
        folder.append(sample(index))
        folder.close()
    text = (folder.path / "samples.jsonl").read_text()
    assert text == "".join(sample(i).model_dump_json(exclude_none=True) + "\n" for i in range(3))


def _line(index: int, attempt: int = 0) -> str:
    return sample(index).model_copy(update={"attempt": attempt}).model_dump_json()


TORN = _line(9)[:25]


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        ([_line(0), "{not json", _line(1)], "samples.jsonl:2: not a sample (not JSON)"),
        ([_line(0), TORN, _line(1)], "samples.jsonl:2: not a sample (not JSON)"),
        ([_line(0), '{"variant": "ngram"}', _line(1)], "samples.jsonl:2: prompt_class: "),
        ([_line(0), "[1, 2]", _line(1)], "samples.jsonl:2: Input should be an object"),
        ([_line(0, 1), TORN, _line(1, 0)], "samples.jsonl:2: not a sample (not JSON)"),
        ([TORN, _line(0)], "samples.jsonl:1: not a sample (not JSON)"),
        ([_line(0), '{"variant": 1}'], "samples.jsonl:2: variant: "),
    ],
    ids=[
        "garbage-mid-attempt",
        "torn-mid-attempt",
        "not-a-sample",
        "not-an-object",
        "torn-before-an-earlier-attempt",
        "torn-first-line-of-the-attempt",
        "bad-last-line-that-is-json",
    ],
)
def test_a_bad_samples_line_is_an_error_at_its_line(
    tmp_path: Path, lines: list[str], problem: str
) -> None:
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    (folder.path / "samples.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidInput) as info:
        folder.samples()
    assert any(str(p).startswith(f"{folder.path}/{problem}") for p in info.value.problems)


@pytest.mark.parametrize(
    ("lines", "torn"),
    [
        ([_line(0), TORN], [2]),
        ([_line(0), TORN, _line(1, 1)], [2]),
        ([_line(0), TORN, TORN[:10], _line(1, 2)], [2, 3]),  # two resumes killed in turn
        ([TORN, _line(1, 1)], [1]),
        ([_line(0), "", _line(1)], []),  # a blank line holds nothing to lose
    ],
    ids=["at-the-end", "before-a-resume", "before-two-resumes", "first-line", "blank"],
)
def test_torn_lines_are_dropped_where_a_kill_leaves_them_and_counted(
    tmp_path: Path, lines: list[str], torn: list[int]
) -> None:
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    (folder.path / "samples.jsonl").write_text("\n".join(lines))
    read = folder.read_samples()
    assert read.torn == torn
    assert len(read.samples) == len(lines) - len(torn) - lines.count("")


def test_a_torn_line_cut_inside_a_character_is_torn_too(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    cut = sample(1, error="é" * 40).model_dump_json().encode()
    (folder.path / "samples.jsonl").write_bytes(_line(0).encode() + b"\n" + cut[:-46])
    assert folder.read_samples() == runs.Samples([sample(0)], torn=[2])


@pytest.mark.parametrize("kind", sorted(special.SPECIAL))
def test_a_special_samples_file_is_one_located_line(tmp_path: Path, kind: str) -> None:
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    path = folder.path / "samples.jsonl"
    message = special.make(kind, path)
    with special.deadline(5), pytest.raises(InvalidInput) as info:
        folder.samples()
    assert str(info.value).startswith(f"{path}: {message}")


def _resumable(tmp_path: Path) -> Path:
    from tests.support.runs import make_run

    shutil.copytree(REPO / "bench" / "prompts", tmp_path / "bench" / "prompts")  # the spec's
    return make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0}, status="interrupted")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("order", "run.json:1: order[1]: [0, 'nosuch'] is not a round and an arm of spec.yaml"),
        ("round", "run.json:1: order[0]: [7, 'baseline'] is not a round and an arm of spec.yaml"),
        (
            "samples",
            "samples.jsonl:2: not a sample (not JSON), and not where a killed run leaves a "
            "torn line",
        ),
        ("run.json", "run.json:1: not JSON: Expecting value"),
    ],
)
def test_a_resume_of_a_damaged_folder_is_one_located_line_and_writes_nothing(
    tmp_path: Path, damage: str, message: str
) -> None:
    from click.testing import CliRunner

    from kbgen.cli import cli

    run = _resumable(tmp_path)
    meta = json.loads((run / "run.json").read_text())
    if damage in ("order", "round"):
        meta["order"] = [[7, "baseline"]] if damage == "round" else [[0, "baseline"], [0, "nosuch"]]
        (run / "run.json").write_text(json.dumps(meta))
    elif damage == "samples":
        lines = (run / "samples.jsonl").read_text().splitlines()
        (run / "samples.jsonl").write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    else:
        (run / "run.json").write_text("")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    result = CliRunner().invoke(cli, ["bench", "--resume", str(run)])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [f"{run}/{message}", "1 problem in 1 file(s)"]
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_a_record_of_a_run_without_a_metrics_snapshot_is_one_located_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kbgen.cli import cli
    from tests.support.runs import make_run

    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0})
    (run / "metrics" / "ngram-0-after.prom").unlink()
    result = CliRunner().invoke(cli, ["record", str(run), "--records", str(tmp_path / "records")])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == (
        f"{run}/metrics/ngram-0-after.prom: the /metrics snapshot that run.json names is missing"
    )


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-5"])
def test_a_record_of_a_run_whose_counter_is_not_a_count_is_one_located_line(
    tmp_path: Path, value: str
) -> None:
    from click.testing import CliRunner

    from kbgen.cli import cli
    from tests.support.runs import make_run

    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0})
    after = run / "metrics" / "ngram-0-after.prom"
    lines = after.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("vllm:generation_tokens_total"))
    lines[at] = f"{lines[at].rsplit(' ', 1)[0]} {value}"
    after.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(cli, ["record", str(run), "--records", str(tmp_path / "records")])
    assert result.exit_code == 1, result.output
    [line, _] = result.stderr.splitlines()
    assert line.startswith(f"{after}: /metrics: counter vllm:generation_tokens_total went from")
