"""A setting the arms' arguments do not explain is a caveat: real CPU logs, GPU-shaped 0.26 ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kbgen.bench import effective, logline
from kbgen.kb.models import EffectiveSettings, Outcome, Variant
from kbgen.record import confounds, verdict
from kbgen.run.counters import Counters, SpecDecodeCounters

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm-logs"
NGRAM = Variant.model_validate(
    {"speculative_config": {"method": "ngram", "num_speculative_tokens": 5}}
)


def _settings(log: str) -> EffectiveSettings:
    found = effective.of_lines(logline.lines((LOGS / log).read_bytes().decode()))
    assert found is not None
    return found


# (baseline's log, variant's log, the settings caveated, in order)
CASES = [
    # vLLM 0.32 logs no async scheduling for the baseline: "not logged" differs from "disabled"
    ("cpu-0.32-baseline.log", "cpu-0.32-ngram.log", ["async_scheduling"]),
    # the H200 proof run's confound: the scheduler and the model runner, not only the speculation
    ("gpu-0.26-baseline.log", "gpu-0.26-ngram.log", ["async_scheduling", "model_runner"]),
    ("gpu-0.26-baseline.log", "gpu-0.26-baseline.log", []),
    # real, on the H200: as vLLM runs it, the same confound; pinned on both arms, none
    ("h200-0.26-baseline.log", "h200-0.26-ngram.log", ["async_scheduling", "model_runner"]),
    ("h200-0.26-pinned-baseline.log", "h200-0.26-pinned-ngram.log", []),
]


@pytest.mark.parametrize(("base", "variant", "settings"), CASES)
def test_what_the_arms_arguments_do_not_explain(
    base: str, variant: str, settings: list[str]
) -> None:
    found = confounds.caveats(
        "baseline",
        {"baseline": Variant(), "ngram": NGRAM},
        {"baseline": _settings(base), "ngram": _settings(variant)},
    )
    assert [c.split(": ", 1)[1].split(" ", 1)[0] for c in found] == settings
    if settings == ["async_scheduling", "model_runner"]:
        assert found == [
            "the servers ran differently beyond the arms' arguments: async_scheduling disabled "
            "for ngram, enabled for baseline (from their logs); the effect measures this too",
            "the servers ran differently beyond the arms' arguments: model_runner V1 for ngram, "
            "V2 for baseline (from their logs); the effect measures this too",
        ]


def _arm(**fields: Any) -> EffectiveSettings:
    return EffectiveSettings.model_validate(fields)


@pytest.mark.parametrize(
    ("variant", "base", "mine", "caveated"),
    [
        (  # pinned on every arm (--no-async-scheduling): no difference
            NGRAM,
            _arm(args={"async_scheduling": False}, behaviour={"async_scheduling": "disabled"}),
            _arm(args={"async_scheduling": False}, behaviour={"async_scheduling": "disabled"}),
            [],
        ),
        (  # the variant's own flag sets it
            Variant(args=["--max-model-len", "4096"]),
            _arm(config={"max_seq_len": "2048"}),
            _arm(config={"max_seq_len": "4096"}),
            [],
        ),
        (  # the variant turns it off itself: --no-enable-prefix-caching
            Variant(args=["--no-enable-prefix-caching"]),
            _arm(config={"enable_prefix_caching": "True"}),
            _arm(config={"enable_prefix_caching": "False"}),
            [],
        ),
        (  # a difference in the logged arguments explains its setting (a spec's ${ARGS})
            Variant(),
            _arm(args={}, config={"kv_cache_dtype": "auto"}),
            _arm(args={"kv_cache_dtype": "fp8"}, config={"kv_cache_dtype": "fp8"}),
            [],
        ),
        (  # -O0 sets the compilation mode
            Variant(args=["-O0"]),
            _arm(config={"compilation_config.mode": "CompilationMode.VLLM_COMPILE"}),
            _arm(config={"compilation_config.mode": "CompilationMode.NONE"}),
            [],
        ),
        (  # the speculative config does not explain what vLLM changed because of it
            NGRAM,
            _arm(config={"compilation_config.cudagraph_mode": "CUDAGraphMode.FULL_AND_PIECEWISE"}),
            _arm(config={"compilation_config.cudagraph_mode": "CUDAGraphMode.PIECEWISE"}),
            ["compilation_config.cudagraph_mode"],
        ),
        (  # a behaviour-changing warning of one arm only
            NGRAM,
            _arm(warnings=["Shared: disabled"]),
            _arm(warnings=["Shared: disabled", "Cascade attention is disabled with spec decode."]),
            ["only ngram's server warned: Cascade attention is disabled with spec decode."],
        ),
        (  # a warning that answers the arm's own setting is no confound
            Variant(args=["--enforce-eager"]),
            _arm(),
            _arm(warnings=["Enforce eager set, disabling torch.compile and CUDAGraphs."]),
            [],
        ),
    ],
)
def test_which_differences_are_explained(
    variant: Variant, base: EffectiveSettings, mine: EffectiveSettings, caveated: list[str]
) -> None:
    found = confounds.caveats(
        "baseline", {"baseline": Variant(), "x": variant}, {"baseline": base, "x": mine}
    )
    assert [c if c.startswith("only") else c.split(": ", 1)[1].split(" ")[0] for c in found] == [
        c.replace("ngram", "x") for c in caveated
    ]


def test_nothing_to_compare_without_the_baseline_s_log() -> None:
    assert confounds.caveats("baseline", {"baseline": Variant(), "ngram": NGRAM}, {}) == []
    only = {"ngram": _settings("gpu-0.26-ngram.log")}
    assert confounds.caveats("baseline", {"baseline": Variant(), "ngram": NGRAM}, only) == []


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--max-num-seqs", "8", "--enforce-eager"], {"max_num_seqs", "enforce_eager"}),
        (["--no-async-scheduling"], {"async_scheduling"}),
        (["--kv-cache-dtype=fp8"], {"kv_cache_dtype"}),
        (["-O3", "-cc.cudagraph_mode=NONE"], {"optimization_level", "compilation_config"}),
        (["8", "-", "--"], set()),
    ],
)
def test_the_settings_an_arm_gives(args: list[str], names: set[str]) -> None:
    assert confounds.given(Variant(args=args)) == names


def _drafted(tokens: int, accepted: int) -> Counters:
    return Counters(spec_decode=SpecDecodeCounters.of(tokens // 5, tokens, accepted, [accepted]))


def test_an_arm_whose_server_drafts_though_it_speculates_nothing_is_refused() -> None:
    """The external launcher pointed at one n-gram server for both arms: the baseline's
    /metrics drafted, acceptance 0.83; refused, naming the arm, where the record said nothing."""
    arms = {"baseline": Variant(), "ngram": NGRAM}
    same = {"baseline": [_drafted(100, 83)], "ngram": [_drafted(100, 83)]}
    [said] = confounds.drafting(arms, same)
    assert said.startswith("baseline: its server drafted 100 tokens (acceptance 0.83)")
    apart = {"baseline": [Counters()], "ngram": [_drafted(100, 60)]}
    assert confounds.drafting(arms, apart) == []


def test_a_refusal_makes_the_verdict_inconclusive_and_says_why() -> None:
    from tests.record.test_verdict import FASTER, experiment

    evidence = experiment({"coding": 0.3, "math": 0.3}, rounds=2)
    refusal = "baseline: its server drafted 100 tokens (acceptance 0.83) though ..."
    decided = verdict.judge(evidence, FASTER, [], refusals=[refusal])
    assert decided.outcome == Outcome.INCONCLUSIVE and decided.reasons[0] == refusal
    assert verdict.judge(evidence, FASTER, []).outcome == Outcome.SUPPORTED
