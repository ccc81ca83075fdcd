"""Run folders as `kbgen bench` leaves them, made without a server, for the record stage's tests."""

from __future__ import annotations

import random
from pathlib import Path

import yaml

from kbgen.run.folder import RunFolder
from kbgen.run.models import FORMAT, RunMeta, RunStatus, VariantRun
from kbgen.run.samples import Sample

SECRET = "sk-abcdefghijklmnop"


def make_sample(
    variant: str,
    cls: str,
    index: int,
    repeat: int,
    rate: float,
    rng: random.Random,
    tokens: int = 32,
    per_chunk: int = 1,
) -> Sample:
    """A request whose decode rate is about `rate` tokens/s."""
    sent = 1_000_000_000 + index * 10_000_000
    ttft = int(rng.uniform(20e6, 30e6))
    step = int(1e9 / rate * per_chunk * rng.uniform(0.95, 1.05))
    chunks = [1] + [per_chunk] * ((tokens - 1) // per_chunk)
    chunks[-1] += tokens - sum(chunks)
    times = [sent + ttft + i * step for i in range(len(chunks))]
    return Sample(
        variant=variant,
        prompt_class=cls,
        prompt_index=index,
        repeat=repeat,
        scheduled_ns=sent,
        sent_ns=sent,
        chunk_ns=times,
        chunk_tokens=chunks,
        done_ns=times[-1] + 1000,
        prompt_tokens=10,
        output_tokens=tokens,
    )


SPEC = {
    "schema_version": 1,
    "id": "synthetic",
    "title": "Synthetic A/B",
    "hypothesis": {
        "statement": "ngram is faster",
        "primary_metric": "decode_tok_s",
        "direction": "increase",
        "minimum_effect": 0.05,
    },
    "server": {
        "launcher": "process",
        "command": ["vllm", "serve"],
        "model": "m",
        "args": ["--api-key", SECRET, "--max-model-len", "2048"],
        "env": {"HF_TOKEN": "hf_abcdefghijklmnop"},
    },
    "baseline": "baseline",
    "variants": {
        "baseline": {},
        "ngram": {
            "args": [f"--hf-token={SECRET}"],
            "speculative_config": {"method": "ngram", "num_speculative_tokens": 5},
        },
    },
    "workload": {
        "prompts": "bench/prompts/seed.jsonl",
        "classes": ["coding", "math"],
        "repeats": 3,
        # one round, the arms one after the other (`make_run`), decided as a spec may accept it
        "rounds": 1,
        "accept_time_confound": True,
    },
    "resolves": ["next-steps#test-ngram"],
    "tags": ["synthetic"],
}


def metrics_text(generated: float, speculative: bool, scale: int) -> str:
    """/metrics as vLLM 0.32 writes it, with the counters these tests need."""
    model = 'engine="0",model_name="m"'
    lines = [
        "# TYPE vllm:generation_tokens counter",
        f"vllm:generation_tokens_total{{{model}}} {generated}",
    ]
    if speculative:
        lines += [
            "# TYPE vllm:spec_decode_num_drafts counter",
            f"vllm:spec_decode_num_drafts_total{{{model}}} {100 * scale}",
            "# TYPE vllm:spec_decode_num_draft_tokens counter",
            f"vllm:spec_decode_num_draft_tokens_total{{{model}}} {480 * scale}",
            "# TYPE vllm:spec_decode_num_accepted_tokens counter",
            f"vllm:spec_decode_num_accepted_tokens_total{{{model}}} {150 * scale}",
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
        ]
        lines += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{model},position="{i}"}} '
            f"{a * scale}"
            for i, a in enumerate([60, 40, 25, 15, 10])
        ]
    return "\n".join(lines) + "\n"


def make_run(
    root: Path,
    rates: dict[str, float],
    versions: tuple[str, str] = ("0.32.0", "0.32.0"),
    status: RunStatus = "complete",
    failures: int = 0,
    prompts: int = 3,
) -> Path:
    """A complete run folder as kbgen bench leaves it, without a server: `prompts` per class."""
    rng = random.Random(5)
    meta = RunMeta.model_validate(
        {
            "format": FORMAT,
            "spec_id": "synthetic",
            "status": "running",
            "started": "2026-11-29T10:15:00+00:00",
            "tool": "kbgen 0.1.0",
            "kbgen": {"version": "0.1.0", "commit": "c0" * 20, "commit_from": "checkout"},
            "git_sha": "abc",
            "hardware": {"cpu": "Test CPU", "cpu_count": 2, "host": "box"},
            "prompt_suite": "bench/prompts/seed.jsonl",
            "attempts": 1,
            "variants": {},
            "order": [[0, variant] for variant in rates],
        }
    )
    folder = RunFolder.create(root, "synthetic", yaml.safe_dump(SPEC), meta)
    for (variant, rate), version in zip(rates.items(), versions, strict=True):
        per_chunk = 3 if variant == "ngram" else 1
        samples = [
            make_sample(variant, cls, i, r, rate, rng, per_chunk=per_chunk)
            for r in range(3)
            for cls in ("coding", "math")
            for i in range(prompts)
        ]
        for s in samples[:failures]:
            s.error, s.chunk_ns, s.chunk_tokens, s.output_tokens = "HTTP 500: boom", [], [], None
        for s in samples:
            folder.append(s)
        generated = sum(s.output_tokens or 0 for s in samples)
        folder.write_metrics(f"{variant}-0-before", metrics_text(100, variant == "ngram", 0))
        folder.write_metrics(
            f"{variant}-0-after", metrics_text(100 + generated, variant == "ngram", 1)
        )
        meta.variants[variant] = VariantRun.model_validate(
            {
                "url": "http://127.0.0.1:8000",
                "command": ["vllm", "serve"],
                "env": {},
                "reused_server": False,
                "engine_version": version,
                "model": "m",
                "max_model_len": 2048,
                "windows": [
                    {
                        "index": 0,
                        "start_ns": 0,
                        "end_ns": 2 * 10**9,
                        "attempt": 0,
                        "before": f"metrics/{variant}-0-before.prom",
                        "after": f"metrics/{variant}-0-after.prom",
                    }
                ],
            }
        )
    folder.close()
    meta.status = status
    folder.write_meta(meta)
    return folder.path
