"""Synthetic and trace traffic on the real vLLM (CPU): prompts built to the token with the served
model's tokenizer, a trace replayed at its times with its blocks shared, recorded, recomputed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbgen.run.folder import RunFolder

GENERATED = Path(__file__).parents[2] / "bench" / "traces" / "generated-small.jsonl"


def _bench(tmp_path: Path, sweep: dict[str, Any] | None = None, **workload: Any) -> RunFolder:
    from click.testing import CliRunner

    from kbgen.cli import cli
    from tests.support import vllm_env
    from tests.support.free_port import free_port

    python = vllm_env.require()
    spec = yaml.safe_load(vllm_env.spec_text(python, free_port(), sweep=sweep, **workload))
    for name in ("prompts", "classes", "per_class", "max_tokens"):
        del spec["workload"][name]
    spec["server"]["args"].remove("--no-enable-prefix-caching")
    spec["server"]["env"] = {"VLLM_SERVER_DEV_MODE": "1"}  # POST /reset_prefix_cache
    spec_file = tmp_path / "traffic.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    ran = CliRunner().invoke(cli, ["bench", str(spec_file), "--runs", str(tmp_path / "runs")])
    assert ran.exit_code == 0, ran.output
    return RunFolder.open(Path(ran.stdout.strip().splitlines()[-1]))


def _record(tmp_path: Path, folder: RunFolder) -> dict[str, Any]:
    from click.testing import CliRunner

    from kbgen.cli import cli

    records = tmp_path / "records"
    made = CliRunner().invoke(cli, ["record", str(folder.path), "--records", str(records)])
    assert made.exit_code == 0, made.output
    path = Path(made.stdout.strip())
    checked = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert checked.exit_code == 0, checked.output
    saved: dict[str, Any] = yaml.safe_load(path.read_text())
    return saved


@pytest.mark.integration
def test_a_trace_is_replayed_at_its_times_with_its_lengths_and_shared_blocks(
    tmp_path: Path,
) -> None:
    """The generated trace (24 requests of growing conversations, 32-token blocks) twice as fast
    as recorded, baseline against n-gram, two rounds: every prompt as long as the trace says,
    every output too, each sent at its time in the trace's order, the prefix cache hit alike in
    every window (emptied after each warm-up)."""
    trace = {"path": str(GENERATED), "block_tokens": 32, "speedup": 2.0}
    folder = _bench(
        tmp_path, trace=trace, concurrency=24, rounds=2, ignore_eos=True, reset_prefix_cache=True
    )
    rows = [json.loads(line) for line in GENERATED.read_text().splitlines()]
    meta = folder.meta()
    assert meta.traffic is not None and meta.traffic.requests == 24
    assert meta.traffic.rate_rps == pytest.approx(2 * 23 / (rows[-1]["timestamp"] / 1000))
    samples = [s for s in folder.samples() if s.ok]
    assert len(samples) == 2 * 2 * 24 and {s.prompt_class for s in samples} == {"trace"}
    for s in samples:
        row = rows[s.prompt_index]
        assert (s.prompt_tokens, s.output_tokens) == (row["input_length"], row["output_length"])
    for arm, round_ in {(s.variant, s.round) for s in samples}:
        window = sorted(
            (s for s in samples if (s.variant, s.round) == (arm, round_)),
            key=lambda s: s.scheduled_ns,
        )
        assert [s.prompt_index for s in window] == list(range(24))  # the trace's own order
        due = [(s.scheduled_ns - window[0].scheduled_ns) / 1e9 for s in window]
        assert due == pytest.approx([r["timestamp"] / 2000 for r in rows], abs=1e-6)
    saved = _record(tmp_path, folder)
    assert saved["workload"]["trace"]["speedup"] == 2.0 and saved["workload"]["classes"] == [
        "trace"
    ]
    (offered,) = {s["offered_rps"] for s in saved["schedule"]}
    assert offered == pytest.approx(meta.traffic.rate_rps, rel=1e-3)
    assert all(c["hits"] > 0 for c in saved["prefix_cache"])  # equal blocks, equal text
    # every window began with the cache emptied, the reused server's too: alike on both arms
    assert len({c["hits"] for c in saved["prefix_cache"]}) == 1


@pytest.mark.integration
def test_synthetic_lengths_are_exact_on_the_served_model(tmp_path: Path) -> None:
    """Twelve requests of log-normal input and uniform output lengths, closed loop: each prompt
    as many of the server's tokens as drawn, each output as many as drawn, on both arms."""
    from kbgen.kb.models import Synthetic
    from kbgen.run import traffic

    synthetic = {
        "count": 12,
        "input_tokens": {"distribution": "lognormal", "mean": 200, "stdev": 120, "max": 1500},
        "output_tokens": {"distribution": "uniform", "mean": 16, "min": 8, "max": 24},
        "seed": 3,
    }
    folder = _bench(tmp_path, synthetic=synthetic, concurrency=2, api="chat")
    drawn = traffic.synthetic(Synthetic.model_validate(synthetic))
    samples = [s for s in folder.samples() if s.ok]
    assert len(samples) == 2 * 12
    for s in samples:
        want = drawn[s.prompt_index]
        assert (s.prompt_tokens, s.output_tokens) == (want.input_tokens, want.output_tokens)
    saved = _record(tmp_path, folder)
    assert saved["workload"]["synthetic"]["input_tokens"]["distribution"] == "lognormal"
    assert saved["workload"]["prompt_suite"] == "synthetic"
    assert "max_tokens" not in saved["workload"]  # each request asked for its own
