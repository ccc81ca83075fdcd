"""redact: secrets are masked in argv, environments and free text; look-alikes are kept."""

from __future__ import annotations

import pytest

from kbgen import redact
from kbgen.redact import MASK

SK = "sk-proj-abcDEF0123456789"
HF = "hf_AbCdEfGh12345678"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["--api-key", "abc123"], ["--api-key", MASK], id="api-key-space"),
        pytest.param(["--api-key=abc123"], ["--api-key=" + MASK], id="api-key-equals"),
        pytest.param(["--api_key", "abc123"], ["--api_key", MASK], id="api_key-underscore"),
        pytest.param(["--hf-token", HF], ["--hf-token", MASK], id="hf-token-space"),
        pytest.param([f"--hf-token={HF}"], ["--hf-token=" + MASK], id="hf-token-equals"),
        pytest.param(["--token", "plain"], ["--token", MASK], id="token"),
        pytest.param(["--password", "hunter22"], ["--password", MASK], id="password"),
        pytest.param(["serve", SK], ["serve", MASK], id="bare-sk-value"),
        pytest.param(["serve", HF], ["serve", MASK], id="bare-hf-value"),
        pytest.param(
            ["-H", "Bearer abc.def-123"], ["-H", f"Bearer {MASK}"], id="bare-bearer-value"
        ),
        pytest.param(
            ["--header", "Bearer    abc"],
            ["--header", f"Bearer    {MASK}"],
            id="bearer-several-spaces",
        ),
        pytest.param(
            ["vllm", "serve", "m", "--api-key", "k3y", "--port", "8000"],
            ["vllm", "serve", "m", "--api-key", MASK, "--port", "8000"],
            id="only-the-value-after-the-option",
        ),
        pytest.param(
            ["--api-key=k3y", "serve"], ["--api-key=" + MASK, "serve"], id="equals-masks-no-next"
        ),
        pytest.param(
            ["-H", f"Authorization: Bearer {SK}"],
            ["-H", f"Authorization: Bearer {MASK}"],
            id="authorization-header-value",
        ),
        pytest.param(
            ["env", f"HF_TOKEN={HF}", "docker", "run", "-e", f"OPENAI_API_KEY={SK}", "img"],
            ["env", "HF_TOKEN=" + MASK, "docker", "run", "-e", "OPENAI_API_KEY=" + MASK, "img"],
            id="NAME=value-assignment",
        ),
    ],
)
def test_args_masks_secrets(argv: list[str], expected: list[str]) -> None:
    given = list(argv)
    assert redact.args(argv) == expected
    assert argv == given  # not modified in place


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--max-num-batched-tokens", "8"], id="max-num-batched-tokens"),
        pytest.param(["--max-num-batched-tokens=8"], id="max-num-batched-tokens-equals"),
        pytest.param(["--tokenizer", "/models/tok"], id="tokenizer"),
        pytest.param(["--tokenizer=/models/tok"], id="tokenizer-equals"),
        pytest.param(["--tokenizer-mode", "auto"], id="tokenizer-mode"),
        pytest.param(["--max-model-len", "2048"], id="max-model-len"),
        pytest.param(["--max-tokens", "64"], id="max-tokens"),
        pytest.param(
            ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 5}'],
            id="speculative-config",
        ),
        pytest.param(["serve", "sk-short"], id="short-sk-is-not-a-key"),
        pytest.param(["--served-model-name", "tiny"], id="served-model-name"),
    ],
)
def test_args_keeps_look_alikes(argv: list[str]) -> None:
    assert redact.args(argv) == argv


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        pytest.param({"HF_TOKEN": HF}, {"HF_TOKEN": MASK}, id="HF_TOKEN"),
        pytest.param({"OPENAI_API_KEY": SK}, {"OPENAI_API_KEY": MASK}, id="OPENAI_API_KEY"),
        pytest.param({"VLLM_API_KEY": "x"}, {"VLLM_API_KEY": MASK}, id="VLLM_API_KEY"),
        pytest.param(
            {"HUGGING_FACE_HUB_TOKEN": HF}, {"HUGGING_FACE_HUB_TOKEN": MASK}, id="HUB_TOKEN"
        ),
        pytest.param({"DB_PASSWORD": "pw"}, {"DB_PASSWORD": MASK}, id="PASSWORD"),
        pytest.param({"MY_VAR": SK}, {"MY_VAR": MASK}, id="sk-value-any-name"),
        pytest.param(
            {"AUTH": "Bearer abc"}, {"AUTH": f"Bearer {MASK}"}, id="bearer-value-any-name"
        ),
        pytest.param(
            {"TOKENIZERS_PARALLELISM": "false"},
            {"TOKENIZERS_PARALLELISM": "false"},
            id="keep-tokenizers",
        ),
        pytest.param({"MAX_TOKENS": "64"}, {"MAX_TOKENS": "64"}, id="keep-MAX_TOKENS"),
        pytest.param(
            {"VLLM_CPU_KVCACHE_SPACE": "4"}, {"VLLM_CPU_KVCACHE_SPACE": "4"}, id="keep-kvcache"
        ),
        pytest.param({"PATH": "/usr/bin"}, {"PATH": "/usr/bin"}, id="keep-PATH"),
    ],
)
def test_env(variables: dict[str, str], expected: dict[str, str]) -> None:
    assert redact.env(variables) == expected


def test_env_masks_only_the_secret_ones() -> None:
    got = redact.env({"HF_TOKEN": HF, "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": SK})
    assert got == {"HF_TOKEN": MASK, "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": MASK}
