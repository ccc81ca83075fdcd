"""A run becomes a record: its figures, its verdict, its config without secrets, and refusals."""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kbgen.bench import driver as bench
from kbgen.bench import effective, provenance
from kbgen.cli import cli
from kbgen.errors import Mismatch
from kbgen.kb import loading as kb
from kbgen.record import command, compose
from kbgen.run.folder import RunFolder
from kbgen.site import render
from tests.support import fake_server
from tests.support.free_port import free_port
from tests.support.records import load_record
from tests.support.runs import SECRET, SPEC, make_run, metrics_text
from tests.support.specs import small_spec


def test_a_run_becomes_a_valid_record_with_a_verdict(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}, prompts=8)
    path = command.record_run(run, records)
    assert kb.load([records]).problems == []  # cross-references resolve too
    saved = load_record(path)
    assert saved.verdict is not None and saved.verdict.outcome == "refuted"
    coding = saved.verdict.per_class["coding"]
    assert coding.effect == pytest.approx(-0.25, abs=0.03)
    assert coding.ci_low is not None and coding.ci_high is not None
    assert coding.ci_low < coding.effect < coding.ci_high and coding.n_baseline == 24
    assert coding.unit == "prompt" and coding.prompts == 8 and len(coding.per_unit) == 8
    assert "Student-t interval on the prompts' log ratios" in saved.verdict.rule
    decode = saved.measurements["ngram"]["math"]["decode_tok_s"]
    assert decode.n == 24 and decode.mean == pytest.approx(
        45 * 31 / 30, rel=0.03
    )  # 31 gaps of 30 tokens
    ngram = saved.spec_decode["ngram"]
    assert (ngram.drafts, ngram.draft_tokens, ngram.accepted_tokens) == (100, 480, 150)
    assert ngram.mean_acceptance_length == 2.5 and ngram.acceptance_rate == 0.3125
    assert ngram.per_position_acceptance == [0.6, 0.4, 0.25, 0.15, 0.1]
    assert "ngram" in saved.spec_decode and "baseline" not in saved.spec_decode
    assert saved.resolves == ["next-steps#test-ngram"]
    assert saved.provenance is not None and saved.provenance.run == run.name


def test_no_secret_reaches_the_record(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    path = command.record_run(run, records)
    text = (
        path.read_text()
        + gzip.decompress((path.parent / f"{path.stem}.samples.jsonl.gz").read_bytes()).decode()
    )
    assert SECRET not in text and "hf_abcdefghijklmnop" not in text
    assert "--api-key\n    - '***'" in text and "--hf-token=***" in text


def test_a_run_folder_holding_secrets_gives_a_record_without_them(
    tmp_path: Path, records: Path
) -> None:
    """A folder with secrets in the clear (copied in by hand): the record and its samples mask
    what it holds."""
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}, failures=1)
    (run / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    samples = run / "samples.jsonl"
    refused = f"HTTP 401: Authorization: Bearer {SECRET}"  # a server quoting what it was sent
    samples.write_text(samples.read_text().replace("HTTP 500: boom", refused))
    path = command.record_run(run, records)
    text = (
        path.read_text()
        + gzip.decompress((path.parent / f"{path.stem}.samples.jsonl.gz").read_bytes()).decode()
    )
    assert SECRET not in text and "HTTP 401: Authorization: Bearer ***" in text
    assert "--api-key\n    - '***'" in text and "--hf-token=***" in text


def test_per_token_itl_is_not_the_chunk_gap_under_speculation(
    tmp_path: Path, records: Path
) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 60.0})
    saved = load_record(command.record_run(run, records))
    ngram = saved.measurements["ngram"]["coding"]
    assert ngram["chunk_gap_ms"].mean == pytest.approx(3 * ngram["itl_ms"].mean, rel=0.05)
    base = saved.measurements["baseline"]["coding"]
    assert base["chunk_gap_ms"].mean == pytest.approx(base["itl_ms"].mean)


def test_no_difference_is_not_supported(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 60.0})
    saved = load_record(command.record_run(run, records))
    assert saved.verdict is not None and saved.verdict.outcome != "supported"


def test_failures_above_the_threshold_make_it_inconclusive(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 30.0}, failures=3, prompts=8)
    saved = load_record(command.record_run(run, records))
    assert saved.verdict is not None and saved.verdict.outcome == "inconclusive"
    coding = saved.verdict.per_class["coding"]  # 3 of its 24 attempts failed in each arm
    assert coding.reason == "12.5% of baseline's attempts failed (limit 5%)"
    assert saved.verdict.per_class["math"].outcome == "refuted"
    assert saved.measurements["baseline"]["coding"]["decode_tok_s"].n == 21  # failures excluded


def test_different_engine_versions_are_refused_unless_allowed(
    tmp_path: Path, records: Path
) -> None:
    run = make_run(
        tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}, versions=("0.32.0", "0.31.1")
    )
    with pytest.raises(
        Mismatch, match=r"engine version differs: baseline=0\.32\.0, ngram=0\.31\.1"
    ):
        command.record_run(run, records)
    assert list(records.glob("*.yaml")) == []
    saved = load_record(command.record_run(run, records, allow_mismatch=True))
    assert saved.verdict is not None
    assert any("--allow-mismatch" in c for c in saved.verdict.caveats)


def test_an_unfinished_run_is_refused(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}, status="failed")
    result = CliRunner().invoke(cli, ["record", str(run), "--records", str(records)])
    assert result.exit_code == 2 and "kbgen bench --resume" in result.stderr


def test_a_run_folder_of_two_attempts_becomes_a_record(tmp_path: Path) -> None:
    """The run folder kbgen bench wrote (tests/fixtures/run-folders): a failure, then a resume."""
    run = Path(__file__).parents[1] / "fixtures" / "run-folders" / "fake-two-attempts"
    record, evidence = compose.from_run(RunFolder.open(run), "two-attempts")
    assert record.config is not None
    assert record.config.engine.version == "0.32.0" and record.config.model.name == "fake"
    assert record.provenance is not None and record.provenance.git_sha is not None
    assert record.config.hardware.model_dump(exclude_unset=True) == {}  # none in run.json
    assert [len(evidence.windows[v]) for v in ("a", "b")] == [2, 1]
    assert len(evidence.final()[0]) == 8


def test_torn_samples_lines_are_dropped_with_a_caveat_and_others_refused(
    tmp_path: Path, records: Path
) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    samples = run / "samples.jsonl"
    lines = samples.read_text().splitlines()
    redone = RunFolder.open(run).samples()[-1].model_copy(update={"attempt": 1})
    torn = [*lines, lines[-1][:40], redone.model_dump_json(exclude_none=True)]
    samples.write_text("\n".join(torn) + "\n")
    saved = load_record(command.record_run(run, records))
    assert saved.verdict is not None
    assert [c for c in saved.verdict.caveats if "torn" in c] == [
        "1 line(s) of the run's samples.jsonl were torn by a kill mid-write and dropped "
        "(their requests were sent again on the resume)"
    ]
    samples.write_text("\n".join([lines[0], lines[1][:40], *lines[1:]]) + "\n")  # mid-attempt
    result = CliRunner().invoke(cli, ["record", str(run), "--records", str(records)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{samples}:2: not a sample (not JSON)")


# --- what the servers ran with, and their start-up ------------------------------------------------

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm-logs"


def test_the_record_keeps_each_arm_s_effective_settings_and_their_confound(
    tmp_path: Path, records: Path
) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}, prompts=8)
    for arm in ("baseline", "ngram"):
        (run / "logs" / f"{arm}.log").write_bytes((LOGS / f"gpu-0.26-{arm}.log").read_bytes())
    saved = load_record(command.record_run(run, records))
    assert saved.effective["baseline"].behaviour == {
        "async_scheduling": "enabled",
        "model_runner": "V2",
    }
    assert saved.effective["ngram"].behaviour == {
        "async_scheduling": "disabled",
        "model_runner": "V1",
    }
    assert saved.effective["ngram"].args["speculative_config"]["method"] == "ngram"
    assert saved.verdict is not None
    confounds = [c for c in saved.verdict.caveats if "beyond the arms' arguments" in c]
    assert [c.split(": ", 1)[1].split(" ")[0] for c in confounds] == [
        "async_scheduling",
        "model_runner",
    ]
    summary = effective.of_folder(RunFolder(run), "ngram")
    assert summary is not None and summary == saved.effective["ngram"]


def test_a_run_without_logs_has_no_effective_settings(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    text = command.record_run(run, records).read_text()
    assert "effective:" not in text and "startup_s:" not in text  # nothing said, nothing timed


def test_start_up_time_from_a_slow_server_reaches_the_record_and_its_page(
    tmp_path: Path, records: Path
) -> None:
    """The loopback stand-in answers /health only after `delay`: each launch took at least it."""
    delay = 1.0
    warning = (
        "(APIServer pid=1) WARNING 12-01 10:00:00 [vllm.py:1078] Async scheduling not supported "
        "with ngram-based speculative decoding and will be disabled."
    )
    spec = small_spec(
        tmp_path,
        "slow",
        server={
            "launcher": "process",
            "command": [sys.executable, fake_server.__file__],
            "model": "m",
            "args": ["--health-delay", str(delay)],
            "port": free_port(),
            "startup_timeout_s": 60,
        },
        variants={"a": {}, "b": {"args": ["--log", warning]}},
        per_class=1,
    )
    text = yaml.safe_dump(spec.model_dump(mode="json", exclude_unset=True))
    folder = RunFolder.create(tmp_path / "runs", spec.id, text, provenance.new_meta(spec))
    asyncio.run(bench.run(spec, folder))
    record, _ = compose.from_run(folder, "slow")
    assert set(record.startup_s) == {"a", "b"}
    assert all(len(s) == 1 and s[0] >= delay for s in record.startup_s.values())
    assert record.effective["b"].behaviour == {"async_scheduling": "disabled"}
    assert record.verdict is not None and any(
        "async_scheduling disabled for b, not logged for a" in c for c in record.verdict.caveats
    )
    summary = yaml.safe_load((folder.path / "summary.json").read_text())
    assert summary["variants"]["b"]["effective"]["behaviour"] == {"async_scheduling": "disabled"}

    page = next(iter(render.record_pages(render.environment(None), record, "r", {}).values()))
    servers = page.split("## Servers", 1)[1].split("## Provenance", 1)[0]
    for arm in ("a", "b"):
        assert f"| {arm} | {render.number(record.startup_s[arm][0])} s |" in servers
    assert "| b | " in servers and "async_scheduling disabled |" in servers
    assert "b's server warned: `Async scheduling not supported" in servers


KBGEN_SHA, SPEC_SHA = "1a" * 20, "2b" * 20
CHECKOUT = {"version": "0.1.0", "commit": KBGEN_SHA, "commit_from": "checkout", "changed": False}


@pytest.mark.parametrize(
    ("meta", "provenance", "notes"),
    [
        (  # the spec in another repository: both commits, told apart
            {
                "kbgen": CHECKOUT,
                "git_sha": SPEC_SHA,
                "git_changed": True,
                "spec_in_kbgen_checkout": False,
            },
            {
                "kbgen": CHECKOUT,
                "git_sha": SPEC_SHA,
                "git_changed": True,
                "spec_in_kbgen_checkout": False,
            },
            [],
        ),
        (  # the spec in kbgen's own checkout: one commit, named twice and said to be one
            {"kbgen": CHECKOUT, "git_sha": KBGEN_SHA, "spec_in_kbgen_checkout": True},
            {"kbgen": CHECKOUT, "git_sha": KBGEN_SHA, "spec_in_kbgen_checkout": True},
            [],
        ),
        (  # outside git, kbgen installed from a VCS commit
            {"kbgen": {"version": "0.1.0", "commit": KBGEN_SHA, "commit_from": "direct_url"}},
            {"kbgen": {"version": "0.1.0", "commit": KBGEN_SHA, "commit_from": "direct_url"}},
            [compose.NO_GIT],
        ),
        (  # neither commit known
            {"kbgen": {"version": "0.1.0"}, "git_changed": None},
            {"kbgen": {"version": "0.1.0"}},
            [compose.NO_GIT, compose.NO_KBGEN_COMMIT],
        ),
    ],
    ids=["spec-elsewhere", "same-checkout", "vcs-install", "nothing-known"],
)
def test_the_record_names_kbgen_s_commit_and_the_spec_s(
    tmp_path: Path,
    meta: dict[str, object],
    provenance: dict[str, object],
    notes: list[str],
) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    written = json.loads((run / "run.json").read_text())
    written["git_sha"] = None
    (run / "run.json").write_text(json.dumps(written | meta))
    record, _ = compose.from_run(RunFolder.open(run), "provenance")
    assert record.provenance is not None
    fields = ("kbgen", "git_sha", "git_changed", "spec_in_kbgen_checkout")
    shown = record.provenance.model_dump(include=set(fields), exclude_none=True)
    assert shown == provenance and record.provenance.notes == notes


def test_a_baseline_whose_server_drafted_is_refused_and_recomputed_the_same(
    tmp_path: Path, records: Path
) -> None:
    """Both arms measured on the n-gram server (the external launcher at one URL): the
    baseline's windows drafted, so the record says so and decides nothing, and `--check`
    recomputes that from the samples and the record's variants."""
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    folder = RunFolder.open(run)
    folder.write_metrics("baseline-0-before", metrics_text(100, True, 0))
    folder.write_metrics("baseline-0-after", metrics_text(100 + 18 * 32, True, 1))
    path = command.record_run(run, records)
    saved = load_record(path)
    assert saved.verdict is not None and saved.verdict.outcome == "inconclusive"
    assert saved.verdict.reasons[0].startswith("baseline: its server drafted 480 tokens")
    assert command.check([path]) == ["ok: every number on 1 record(s) matches its samples"]


def test_an_inconclusive_class_says_what_held_it_and_how_many_more_prompts_would_decide(
    tmp_path: Path, records: Path
) -> None:
    """The issue's demo line said "about 8 prompts would decide it" of a class that had them:
    each line names what held the class and counts the prompts it lacks, not those it has."""
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}, prompts=3)
    lines = command.summary(command.record_run(run, records))
    assert lines[0].startswith("coding: inconclusive, -23.4% [-31.1%, -14.8%]")
    held = "3 paired prompts; a class needs at least 8; about 5 more prompts would decide it"
    assert f": {held} (8 a class: about " in lines[0]
