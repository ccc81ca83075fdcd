"""vLLM's speculative options read out of a variant's arguments, as vLLM itself reads them."""

from __future__ import annotations

from typing import Any

import pytest

from kbgen.kb.speculative_args import split

NGRAM = '{"method": "ngram", "num_speculative_tokens": 5}'


@pytest.mark.parametrize(
    ("args", "rest", "found", "at"),
    [
        (["--max-num-seqs", "8"], ["--max-num-seqs", "8"], None, None),
        (
            ["--max-num-seqs", "8", "--speculative-config", NGRAM],
            ["--max-num-seqs", "8"],
            {"method": "ngram", "num_speculative_tokens": 5},
            2,
        ),
        (
            [f"--speculative_config={NGRAM}", "--enforce-eager"],
            ["--enforce-eager"],
            {"method": "ngram", "num_speculative_tokens": 5},
            0,
        ),
        (["-sc", NGRAM], [], {"method": "ngram", "num_speculative_tokens": 5}, 0),
        (
            ["-sc", '{"method": "suffix", "suffix-decoding-max-tree-depth": 8}'],
            [],
            {"method": "suffix", "suffix_decoding_max_tree_depth": 8},
            0,
        ),
        (
            [
                "--speculative-config.method",
                "ngram_gpu",
                "--speculative_config.num_speculative_tokens=3",
                "--speculative-config.draft_load_config.load_format",
                "dummy",
            ],
            [],
            {
                "method": "ngram_gpu",
                "num_speculative_tokens": 3,
                "draft_load_config": {"load_format": "dummy"},
            },
            0,
        ),
        (
            [
                "--dtype",
                "bfloat16",
                "--spec-method",
                "eagle3",
                "--spec-model=/m/e",
                "--spec_tokens",
                "4",
            ],
            ["--dtype", "bfloat16"],
            {"method": "eagle3", "model": "/m/e", "num_speculative_tokens": 4},
            2,
        ),
    ],
    ids=["none", "json", "underscore-equals", "short", "dashed-keys", "dotted", "spec-flags"],
)
def test_speculative_options_are_read_as_vllm_reads_them(
    args: list[str], rest: list[str], found: dict[str, Any] | None, at: int | None
) -> None:
    assert split(args) == (rest, found, at, [])


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--speculative-config", "{"], (0, "--speculative-config: not JSON")),
        (["-sc", "[1]"], (0, "-sc: should be a JSON object")),
        (["--max-num-seqs", "4", "-sc"], (2, "-sc needs a value")),
        (["--spec-tokens", "five"], (0, "--spec-tokens: 'five' is not an integer")),
        (
            ["-sc", NGRAM, "--spec-tokens", "3"],
            (2, "speculative config key 'num_speculative_tokens' is given twice"),
        ),
        (["--speculative-config..x", "1"], (0, "--speculative-config..x: an empty key")),
    ],
    ids=["not-json", "not-object", "no-value", "not-int", "twice", "empty-key"],
)
def test_a_speculative_option_that_cannot_be_read_is_a_problem_at_its_argument(
    args: list[str], problem: tuple[int, str]
) -> None:
    problems = split(args)[3]
    assert len(problems) == 1 and problems[0][0] == problem[0]
    assert problems[0][1].startswith(problem[1])
