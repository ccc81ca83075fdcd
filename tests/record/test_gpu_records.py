"""The H200 records of the example knowledge base, against what the real GPU server showed.

Measured by bench/gpu (vLLM 0.26.0 on one NVIDIA H200, SmolLM2-135M): their start-up times
agree with the servers' own logs (tests/fixtures/vllm-logs/h200-*), the steady-state rate at
32 streams is above the whole window's (ramp-up and ramp-down left out), the provenance names
the machine and the software, and the default run carries the confound the pinned run removes.
`kbgen check --every-record` recomputes all their numbers from their samples.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).parents[2]
LOGS = REPO / "tests" / "fixtures" / "vllm-logs"
RECORDS = {
    key: REPO / "records" / f"2026-12-01-ngram-vs-baseline-h200-{key}.yaml"
    for key in ("c1", "c1-pinned", "c32", "c32-pinned")
}
STAMP = re.compile(r" (\d\d-\d\d \d\d:\d\d:\d\d) \[")


def record(key: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(RECORDS[key].read_text())
    return data


def logged_startups(log: Path) -> list[float]:
    """Per launch in a kept log: seconds from the server's first timestamped line to its last
    one before uvicorn's `Application startup complete.`"""
    spans, first, last = [], None, None
    for line in log.read_text().splitlines():
        if line.startswith("$ "):  # kbgen's launch line
            first = last = None
        elif m := STAMP.search(line):
            last = dt.datetime.strptime(f"2026-{m[1]}", "%Y-%m-%d %H:%M:%S")
            first = first or last
        if "Application startup complete" in line and first and last:
            spans.append((last - first).total_seconds())
    return spans


@pytest.mark.parametrize("arm", ["baseline", "ngram"])
def test_start_up_times_agree_with_the_server_s_own_log(arm: str) -> None:
    """The launcher's clock (launch to healthy) against the log's (first to last line): longer
    by the interpreter's start and torch's import before vLLM logs anything, never shorter."""
    measured = record("c1")["startup_s"][arm]
    logged = logged_startups(LOGS / f"h200-0.26-{arm}.log")
    assert len(measured) == len(logged) >= 1
    for kbgen_s, log_s in zip(measured, logged, strict=True):
        assert log_s <= kbgen_s <= log_s + 30, (kbgen_s, log_s)


@pytest.mark.parametrize("key", ["c32", "c32-pinned"])
def test_the_steady_state_rate_at_32_streams_is_above_the_whole_window_s(key: str) -> None:
    for arm, classes in record(key)["measurements"].items():
        for cls, metrics in classes.items():
            whole, steady = metrics["output_tok_s"]["mean"], metrics["steady_output_tok_s"]["mean"]
            assert steady > whole, (arm, cls)


def test_a_single_stream_has_no_separate_steady_state() -> None:
    for classes in record("c1")["measurements"].values():
        assert all("steady_output_tok_s" not in metrics for metrics in classes.values())


@pytest.mark.parametrize("key", RECORDS)
def test_the_provenance_names_the_machine_and_the_software(key: str) -> None:
    config = record(key)["config"]
    nvidia_smi = (LOGS.parent / "gpu" / "h200-nvidia-smi.csv").read_text().strip()
    name, memory_mib, driver = (part.strip() for part in nvidia_smi.split(","))
    assert config["hardware"]["accelerator"] == name and config["hardware"]["count"] == 1
    assert config["hardware"]["accelerator_memory_gib"] == round(int(memory_mib) / 1024, 1)
    assert config["software"]["driver"] == driver
    python, torch, cuda, vllm = (LOGS.parent / "gpu" / "h200-versions.txt").read_text().split()
    assert config["software"]["torch"] == torch and config["software"]["cuda"] == cuda
    assert config["software"]["python"] == python and config["engine"]["version"] == vllm


@pytest.mark.parametrize(("key", "confounded"), [("c1", True), ("c32", True), ("c1-pinned", False)])
def test_the_default_run_carries_the_confound_the_pinned_run_removes(
    key: str, confounded: bool
) -> None:
    caveats = record(key)["verdict"]["caveats"]
    found = [c for c in caveats if "beyond the arms' arguments" in c]
    assert bool(found) is confounded
    if confounded:
        assert any("async_scheduling" in c for c in found)
        assert any("model_runner" in c for c in found)


def test_n_gram_is_refuted_in_every_class_of_every_h200_record() -> None:
    """The README's "slower in every class at both concurrencies, pinned or not"."""
    for key in RECORDS:
        verdict = record(key)["verdict"]
        assert verdict["outcome"] == "refuted", key
        assert all(
            c["outcome"] == "refuted" and c["ci_high"] < 0 for c in verdict["per_class"].values()
        )


@pytest.mark.parametrize("concurrency", ["c1", "c32"])
def test_the_pinned_effects_lie_within_the_default_runs_intervals(concurrency: str) -> None:
    """The README's "on this small model the confound is smaller than the spread between two
    runs": pinning the scheduler and the runner moves no class's effect out of its interval."""
    default = record(concurrency)["verdict"]["per_class"]
    pinned = record(f"{concurrency}-pinned")["verdict"]["per_class"]
    assert default.keys() == pinned.keys()
    for cls, was in default.items():
        assert was["ci_low"] <= pinned[cls]["effect"] <= was["ci_high"], cls


def _example(rid: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "records" / f"{rid}.yaml").read_text())
    return data


DECIDER = "2026-12-06-eagle3-k1-h100-pinned"  # the SmolLM2 plan's benchmark, on one H100


def _cells(rid: str) -> dict[tuple[str, int, str], dict[str, Any]]:
    return {
        (c["variant"], c["load"]["concurrency"], c["class"]): c
        for c in _example(rid)["verdict"]["cells"]
    }


def test_eagle3_and_n_gram_are_refuted_in_every_cell_and_the_run_again_agrees() -> None:
    """The READMEs' "refuted in every class at every load, decided at round 2 in both runs",
    "−35% to −53% a class" for EAGLE-3 at 1 token, and "the run again within 1.7 points";
    recomputed with the whole record as the family, n-gram at one stream is left undecided in
    coding and code-edit (the run again: code-edit), every other cell refuted."""
    first, again = _cells(DECIDER), _cells(f"{DECIDER}-2")
    assert first.keys() == again.keys() and len(first) == 2 * 3 * 4  # arms × loads × classes
    undecided = {("ngram", 1, "coding"), ("ngram", 1, "code-edit")}
    for key, cell in first.items():
        assert cell["outcome"] == ("inconclusive" if key in undecided else "refuted"), key
        assert again[key]["outcome"] == (
            "inconclusive" if key == ("ngram", 1, "code-edit") else "refuted"
        ), key
        assert abs(cell["effect"] - again[key]["effect"]) < 0.017, key
    eagle3 = [c["effect"] for (arm, _, _), c in first.items() if arm == "eagle3"]
    assert (round(max(eagle3), 2), round(min(eagle3), 2)) == (-0.35, -0.53)
    for rid in (DECIDER, f"{DECIDER}-2"):
        assert _example(rid)["cost"]["left"] == {
            arm: "refuted in every class at every load: the claimed change is ruled out by round 2"
            for arm in ("ngram", "eagle3")
        }


def test_the_decider_s_draft_is_the_one_its_train_record_made_and_serves_as_on_the_h200() -> None:
    """The draft's provenance (its folder's sha256, as the train record names its output) and
    the READMEs' acceptance "within 0.002 (EAGLE-3 at 1 token) and 0.004 (n-gram)" of the
    H200 runs."""
    record = _example(DECIDER)
    [folder] = [
        o
        for o in _example("2026-12-06-eagle3-train-smollm2-h100")["step"]["outputs"]
        if o["path"] == "/tmp/draft"
    ]
    assert record["drafts"]["eagle3"]["sha256"] == folder["sha256"]
    assert record["drafts"]["eagle3"]["bytes"] == folder["bytes"]
    served = record["spec_decode"]
    k1 = _example("2026-12-04-eagle3-k1-h200-pinned")["spec_decode"]
    sweep = _example("2026-12-04-eagle3-sweep-h200-pinned")["spec_decode"]
    for h200 in (k1["eagle3"], sweep["eagle3-k1"]):
        assert served["eagle3"]["per_position_acceptance"] == pytest.approx(
            h200["per_position_acceptance"], abs=0.002
        )
    for h200 in (k1["ngram"], sweep["ngram"]):
        assert served["ngram"]["per_position_acceptance"] == pytest.approx(
            h200["per_position_acceptance"], abs=0.004
        )
