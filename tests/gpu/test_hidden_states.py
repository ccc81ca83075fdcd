"""bench/gpu/eagle3/hidden_states.py batches rows of like length, padded on the right: each row's
states are those of a forward pass of that row alone (the tiny model in float32 on this CPU, in
the vLLM venv's transformers; `datasets`, which that venv lacks, stood in for by its rows)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support import vllm_env

pytestmark = pytest.mark.integration  # the vLLM venv's torch and transformers on the tiny model

SCRIPT = vllm_env.REPO / "bench" / "gpu" / "eagle3" / "hidden_states.py"
# runs the script on rows of 5 to 59 tokens in batches of 8, then each row alone; prints the
# largest difference and the rows it compared
CHECK = """
import json, random, runpy, sys, types
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

model, prepared, script = sys.argv[1:4]
random.seed(0)
rows = [[random.randrange(1, 200) for _ in range(random.randrange(5, 60))] for _ in range(37)]
class Rows(list):
    def __getitem__(self, key):
        return list(rows) if key == "input_ids" else list.__getitem__(self, key)
sys.modules["datasets"] = types.SimpleNamespace(load_from_disk=lambda path: Rows(rows))
sys.argv = ["hidden_states.py", model, prepared, "--device", "cpu", "--batch", "8"]
runpy.run_path(script, run_name="__main__")
m = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
layers = m.config.num_hidden_layers
aux, seen = [2, layers // 2, layers - 3], {}
m.model.norm.register_forward_pre_hook(lambda _m, a: seen.__setitem__("last", a[0]))
worst, compared = 0.0, 0
with torch.inference_mode():
    for i, row in enumerate(rows):
        got = m.model(input_ids=torch.tensor(row)[None], output_hidden_states=True)
        alone = torch.stack([got.hidden_states[k][0] for k in aux] + [seen["last"][0]], dim=1)
        saved = load_file(f"{prepared}/hidden_states/hs_{i}.safetensors")
        assert saved["token_ids"].tolist() == row
        assert saved["hidden_states"].shape == alone.shape
        worst = max(worst, (saved["hidden_states"] - alone).abs().max().item())
        compared += 1
print(json.dumps({"worst": worst, "compared": compared}))
"""


def test_batched_rows_have_the_states_of_each_row_alone(tmp_path: Path) -> None:
    python = vllm_env.require()
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    done = subprocess.run(
        [str(python), "-c", CHECK, str(vllm_env.TINY), str(prepared), str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["compared"] == 37 and found["worst"] < 1e-5
    stats = json.loads((prepared / "hidden_states.json").read_text())
    assert stats["rows"] == 37 and stats["tokens"] > 37 * 5
