"""`kbgen record --from TOOL VARIANT=FILE …`: imports on the command line, in process."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.kb.documents import load_file
from kbgen.kb.models import Record
from kbgen.record.importers.imported import no_split
from kbgen.record.recompute import recompute
from tests.support.imports import (
    BASE,
    BY_POSITION,
    CHAT_BASE,
    CHAT_NGRAM,
    NGRAM,
    PROMPTS,
    SPEC,
    SPEC_OF,
    SWEEP_SPEC,
    VLLM_SWEEP,
    chat_lines,
    rewrite,
    suite_file,
    sweep_copy,
    unpacked,
)


def test_import_makes_a_record_that_checks(tmp_path: Path) -> None:
    records = tmp_path / "records"
    spec = tmp_path / "spec.yaml"
    spec.write_text((SPEC).read_text())
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--from",
            "vllm-bench",
            f"baseline={BASE}",
            f"ngram={NGRAM}",
            "--spec",
            str(spec),
            "--records",
            str(records),
        ],
    )
    assert result.exit_code == 0, result.output
    path = Path(result.stdout.strip())  # stdout: the path alone; the classes go to stderr
    assert result.stderr.startswith("all: ")
    saved = load_file(path)
    assert isinstance(saved, Record)
    assert saved.provenance is not None and saved.provenance.source == "imported"
    assert any("no per-class split" in n for n in saved.provenance.notes)
    assert saved.verdict is not None and saved.verdict.method == "samples"
    assert list(saved.verdict.per_class) == ["all"]
    ngram = saved.spec_decode["ngram"]
    raw = json.loads(NGRAM.read_text())
    assert ngram.acceptance_rate == pytest.approx(raw["spec_decode_acceptance_rate"] / 100, 1e-5)
    assert ngram.mean_acceptance_length == pytest.approx(raw["spec_decode_acceptance_length"], 1e-5)
    assert "itl_ms" in saved.measurements["baseline"]["all"]
    assert "itl_ms" not in saved.measurements["ngram"]["all"]  # unknown tokens per chunk
    assert CliRunner().invoke(cli, ["record", "--check", str(path)]).exit_code == 0


def test_pairs_must_name_their_variant(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["record", "--from", "vllm-bench", str(BASE), str(NGRAM), "--records", str(tmp_path)]
    )
    assert result.exit_code == 2 and "VARIANT=FILE" in result.stderr


def test_a_variant_named_twice_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--from",
            "vllm-bench",
            f"baseline={BASE}",
            f"baseline={NGRAM}",
            "--spec",
            str(SPEC),
            "--records",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 2
    assert result.stderr == "error: variant 'baseline' given more than once\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["../x", "Baseline", "a b", "x-", "x_", "_x", "a.b"])
def test_a_variant_name_that_is_not_a_slug_is_a_usage_error(tmp_path: Path, name: str) -> None:
    spec = SPEC
    args = ["record", "--from", "vllm-bench", f"{name}={BASE}", f"ngram={NGRAM}"]
    result = CliRunner().invoke(cli, [*args, "--spec", str(spec), "--records", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {name!r}: a variant name is lower-case letters, digits and inner hyphens "
        "or underscores\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("base", "ngram", "prompts"), BY_POSITION)
def test_a_chat_import_with_its_prompt_file(
    tmp_path: Path, base: Path, ngram: Path, prompts: Path
) -> None:
    """The issue's case: per-token ITL for the baseline, no false multi-token note, and the
    prompt file's classes, matched by position."""
    records = tmp_path / "records"
    spec = SPEC_OF[base]
    args = ["record", "--from", "vllm-bench", f"baseline={base}", f"ngram={ngram}"]
    result = CliRunner().invoke(
        cli, [*args, "--spec", str(spec), "--records", str(records), "--prompts", str(prompts)]
    )
    assert result.exit_code == 0, result.output
    suite = [json.loads(line) for line in prompts.read_text().splitlines()]
    classes = list(dict.fromkeys(p["class"] for p in suite))
    assert [line.split(":")[0] for line in result.stderr.splitlines()] == classes
    saved = load_file(Path(result.stdout.strip()))
    assert isinstance(saved, Record) and saved.workload is not None
    assert saved.workload.classes == classes
    assert saved.workload.prompt_suite_sha256 == hashlib.sha256(prompts.read_bytes()).hexdigest()
    assert saved.verdict is not None and list(saved.verdict.per_class) == classes
    for cls in classes:
        assert "itl_ms" in saved.measurements["baseline"][cls]
        assert "itl_ms" not in saved.measurements["ngram"][cls]  # n-gram: several a chunk
    assert saved.provenance is not None
    notes = saved.provenance.notes
    assert not any(n.startswith("baseline: in ") for n in notes)  # no multi-token note
    assert any(n.startswith("ngram: in ") and "one token each" in n for n in notes)
    for variant in ("baseline", "ngram"):
        assert f"{variant}: classes from {prompts.name}, matched by position" in "\n".join(notes)
        assert no_split(variant) not in notes
    assert CliRunner().invoke(cli, ["record", "--check", result.stdout.strip()]).exit_code == 0


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        ([], 1, "vllm-bench-chat-baseline.json: 16 requests, but"),
        (["--check"], 2, "--prompts and --accept-time-confound go with --from"),
    ],
    ids=["mismatch-exits-1", "without-from-exits-2"],
)
def test_prompts_on_the_command_line(
    tmp_path: Path, extra: list[str], code: int, message: str
) -> None:
    suite = suite_file(tmp_path, chat_lines()[:8])
    spec = SPEC_OF[CHAT_BASE]
    pairs = [f"baseline={CHAT_BASE}", f"ngram={CHAT_NGRAM}"]
    args = ["--from", "vllm-bench", *pairs] if not extra else [str(tmp_path / "r.yaml")]
    options = ["--prompts", str(suite), "--spec", str(spec), "--records", str(tmp_path / "records")]
    result = CliRunner().invoke(cli, ["record", *args, *extra, *options])
    assert result.exit_code == code, result.output
    first, *rest = result.stderr.splitlines()  # the problem on one line, then their count
    assert message in first and rest == (["1 problem in 1 file(s)"] if code == 1 else [])
    assert "Traceback" not in result.output and not (tmp_path / "records").exists()


def test_one_run_per_arm_decides_only_when_the_command_line_accepts_it(tmp_path: Path) -> None:
    """An import of one run per arm is one round: inconclusive for the time confound, unless
    --accept-time-confound (as a spec's workload can) accepts it, which the record keeps."""
    pairs = [f"baseline={BASE}", f"ngram={NGRAM}"]
    outcomes = {}
    for accept in (False, True):
        records = tmp_path / str(accept)
        options = ["--spec", str(SPEC), "--records", str(records)]
        flag = ["--accept-time-confound"] if accept else []
        result = CliRunner().invoke(
            cli, ["record", "--from", "vllm-bench", *pairs, *options, *flag]
        )
        assert result.exit_code == 0, result.output
        record = load_file(Path(result.stdout.strip()))
        assert isinstance(record, Record)
        assert record.verdict is not None and record.workload is not None
        outcomes[accept] = record.verdict.outcome
        assert record.workload.accept_time_confound is (True if accept else None)
        assert ("one round" in result.stderr) is not accept
    assert outcomes == {False: "inconclusive", True: "refuted"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (SPEC, "error: the spec's variant(s) ngram have no result file: give ngram=FILE\n"),
        (None, "error: only baseline=FILE: an import compares two variants, the baseline first"),
    ],
    ids=["with-spec", "without-spec"],
)
def test_one_result_file_is_a_missing_variant(
    tmp_path: Path, spec: Path | None, message: str
) -> None:
    """Not a word about the hypothesis: the variant is what is missing, said before any file
    is read."""
    options = ["--spec", str(spec)] if spec else []
    result = CliRunner().invoke(
        cli,
        ["record", "--from", "vllm-bench", f"baseline={tmp_path / 'absent.json'}", *options],
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and "hypothesis" not in result.stderr


def test_a_planned_record_filled_from_an_import_takes_the_spec_s_setup(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    planned = records / "2026-11-29-planned.yaml"
    planned.write_text(
        "schema_version: 1\nid: 2026-11-29-planned\ntitle: Planned\nstatus: planned\n"
        "created: 2026-11-29\nhypothesis:\n  statement: faster\n  primary_metric: decode_tok_s\n"
        "  direction: increase\n  minimum_effect: 0.05\nconfig:\n  engine: {name: vllm}\n"
        "  model: {name: tiny}\n  hardware: {}\n  baseline: baseline\n"
        "  variants: {baseline: {}, ngram: {}}\nunknown: [config.hardware]\n"
    )
    args = ["record", "--from", "vllm-bench", f"baseline={CHAT_BASE}", f"ngram={CHAT_NGRAM}"]
    options = ["--into", str(planned), "--spec", str(SPEC_OF[CHAT_BASE]), "--prompts", str(PROMPTS)]
    result = CliRunner().invoke(cli, [*args, *options])
    assert result.exit_code == 0, result.output
    saved = load_file(planned)
    assert isinstance(saved, Record) and saved.config is not None
    assert saved.title == "Planned"  # the planned record's own
    assert saved.config.variants["ngram"].speculative_config is not None  # the spec's
    assert saved.config.hardware.cpu is not None
    assert saved.unknown == []  # the composed record knows it all: the author's list is gone


def _recorded(tmp_path: Path, args: list[str]) -> Path:
    """The record `kbgen record ARGS` wrote into tmp_path/records, checked by `--check`."""
    result = CliRunner().invoke(cli, ["record", *args, "--records", str(tmp_path / "records")])
    assert result.exit_code == 0, result.output
    path = Path(result.stdout.strip())
    check = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert check.exit_code == 0 and "ok: every number" in check.stdout, check.output
    assert recompute(path) == []
    return path


def test_a_vllm_bench_sweep_folder_is_one_sweep_record_that_checks(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SWEEP_SPEC)
    path = _recorded(tmp_path, ["--from", "vllm-bench-sweep", str(VLLM_SWEEP), "--spec", str(spec)])
    saved = load_file(path)
    assert isinstance(saved, Record) and saved.config is not None and saved.workload is not None
    assert saved.config.sweep == {"workload.concurrency": [1, 2]}  # the spec's
    assert saved.config.variants["ngram"].speculative_config is not None
    assert saved.workload.loads == [{"concurrency": 1}, {"concurrency": 2}]
    assert saved.verdict is not None and len(saved.verdict.cells) == 2
    assert saved.provenance is not None
    assert "the baseline is baseline: the spec's baseline" in saved.provenance.notes
    assert saved.raw_samples is not None
    header = json.loads(
        gzip.decompress((path.parent / saved.raw_samples.path).read_bytes()).split(b"\n")[0]
    )
    assert header["loads"] == [{"concurrency": 1}, {"concurrency": 2}]


def test_a_guidellm_sweep_is_one_sweep_record_that_checks(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SWEEP_SPEC.replace("sweep:\n  workload.concurrency: [1, 2]\n", ""))
    files = unpacked(tmp_path)
    pairs = [f"{arm}={file}" for arm, file in files.items()]
    path = _recorded(tmp_path, ["--from", "guidellm", *pairs, "--spec", str(spec)])
    saved = load_file(path)
    assert isinstance(saved, Record) and saved.workload is not None
    assert saved.workload.loads is not None and len(saved.workload.loads) == 4
    assert saved.verdict is not None and len(saved.verdict.cells) == 4


@pytest.mark.parametrize(
    ("targets", "code", "message"),
    [
        ([str(VLLM_SWEEP), str(VLLM_SWEEP)], 2, "error: --from vllm-bench-sweep takes one FOLDER"),
        ([f"baseline={VLLM_SWEEP}"], 2, "error: --from vllm-bench-sweep takes one FOLDER"),
        ([str(VLLM_SWEEP.parent)], 1, "no combination folders (SERVE-…, BENCH-…)"),
    ],
    ids=["two-folders", "a-pair", "the-parent-folder"],
)
def test_a_sweep_import_takes_one_experiment_folder(
    tmp_path: Path, targets: list[str], code: int, message: str
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SWEEP_SPEC)
    args = ["record", "--from", "vllm-bench-sweep", *targets, "--spec", str(spec)]
    result = CliRunner().invoke(cli, [*args, "--records", str(tmp_path / "records")])
    assert result.exit_code == code and message in result.stderr, result.output
    assert "Traceback" not in result.output and not (tmp_path / "records").exists()


def test_a_malformed_sweep_folder_is_one_line_naming_the_file_and_field(tmp_path: Path) -> None:
    folder = sweep_copy(tmp_path)
    run = folder / "SERVE--ngram-BENCH--max_concurrency=2" / "run=0.json"
    rewrite(run, lambda data: data.update(speculative_config={"method": "ngram"}))
    spec = tmp_path / "spec.yaml"
    spec.write_text(SWEEP_SPEC)
    args = ["record", "--from", "vllm-bench-sweep", str(folder), "--spec", str(spec)]
    result = CliRunner().invoke(cli, [*args, "--records", str(tmp_path / "records")])
    assert result.exit_code == 1, result.output
    first, count = result.stderr.splitlines()
    line = run.read_text().splitlines().index('    "speculative_config": {') + 1
    assert first.startswith(f"{run}:{line}: speculative_config: ")
    assert count == "1 problem in 1 file(s)" and "Traceback" not in result.output


def test_a_sweep_s_variants_are_the_spec_s(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SWEEP_SPEC.replace("  ngram:\n", "  eagle:\n"))
    args = ["record", "--from", "vllm-bench-sweep", str(VLLM_SWEEP), "--spec", str(spec)]
    result = CliRunner().invoke(cli, [*args, "--records", str(tmp_path / "records")])
    assert result.exit_code == 2
    assert "its variants (baseline, ngram) are not the spec's (baseline, eagle)" in result.stderr
