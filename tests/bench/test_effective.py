"""What a server ran with, from its log: real logs of vLLM 0.32 (CPU) and 0.26 (one H200), and
GPU-shaped ones of 0.26."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kbgen.bench import effective, logline
from kbgen.kb.models import EffectiveSettings

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm-logs"
NGRAM = {
    "method": "ngram",
    "num_speculative_tokens": 5,
    "prompt_lookup_max": 4,
    "prompt_lookup_min": 2,
}
SPEC_REPR = "SpeculativeConfig(method='ngram', model=None, num_spec_tokens=5)"
ASYNC_OFF = (
    "Async scheduling not supported with ngram-based speculative decoding and will be disabled."
)

# (log, what the engine chose, some of its arguments, some of its config, some of its warnings)
CASES: list[tuple[str, dict[str, str], dict[str, Any], dict[str, str], list[str]]] = [
    (
        "cpu-0.32-baseline.log",
        {"model_runner": "V1"},
        {"max_model_len": 2048, "enforce_eager": True, "enable_prefix_caching": False},
        {"speculative_config": "None", "device_config": "cpu", "max_seq_len": "2048"},
        ["Model Runner V2 requires Triton; using the V1 model runner instead."],
    ),
    (
        "cpu-0.32-ngram.log",
        {"async_scheduling": "disabled", "model_runner": "V1"},
        {"speculative_config": NGRAM, "max_model_len": 2048},
        {
            "speculative_config": SPEC_REPR,
            "compilation_config.mode": "CompilationMode.NONE",
        },
        [ASYNC_OFF],
    ),
    (
        "gpu-0.26-baseline.log",
        {"async_scheduling": "enabled", "model_runner": "V2"},
        {"max_model_len": 2048},
        {
            "speculative_config": "None",
            "device_config": "cuda",
            "compilation_config.mode": "CompilationMode.VLLM_COMPILE",
            "compilation_config.cudagraph_mode": "CUDAGraphMode.FULL_AND_PIECEWISE",
        },
        [],
    ),
    (  # real: the H200 run of bench/experiments/gpu/ngram-vs-baseline-h200-c1.yaml, vLLM 0.26.0
        "h200-0.26-baseline.log",
        {"async_scheduling": "enabled", "model_runner": "V2"},
        {"max_model_len": 2048, "gpu_memory_utilization": 0.5, "enable_prefix_caching": False},
        {
            "speculative_config": "None",
            "device_config": "cuda",
            "compilation_config.mode": "CompilationMode.VLLM_COMPILE",
        },
        [],
    ),
    (
        "h200-0.26-ngram.log",
        {"async_scheduling": "disabled", "model_runner": "V1"},
        {"speculative_config": NGRAM, "max_model_len": 2048},
        {"speculative_config": SPEC_REPR, "device_config": "cuda"},
        [
            ASYNC_OFF,
            "Model Runner V2 does not yet support ngram/ngram_gpu speculative decoding; using the "
            "V1 model runner instead.",
        ],
    ),
    (  # real: the pinned run (no async scheduling, VLLM_USE_V2_MODEL_RUNNER=0 on both arms)
        "h200-0.26-pinned-baseline.log",
        {"async_scheduling": "disabled"},
        {"async_scheduling": False, "max_model_len": 2048},
        {"speculative_config": "None", "device_config": "cuda"},
        [],
    ),
    (
        "h200-0.26-pinned-ngram.log",
        {"async_scheduling": "disabled"},
        {"async_scheduling": False, "speculative_config": NGRAM},
        {"speculative_config": SPEC_REPR, "device_config": "cuda"},
        [],
    ),
    (
        "gpu-0.26-ngram.log",
        {"async_scheduling": "disabled", "model_runner": "V1"},
        {"speculative_config": NGRAM},
        {"enforce_eager": "False", "enable_prefix_caching": "True"},
        [
            ASYNC_OFF,
            "Model Runner V2 does not yet support ngram/ngram_gpu speculative decoding; using the "
            "V1 model runner instead.",
        ],
    ),
]


def _read(name: str) -> EffectiveSettings:
    found = effective.of_lines(logline.lines((LOGS / name).read_bytes().decode()))
    assert found is not None
    return found


@pytest.mark.parametrize(("log", "behaviour", "args", "config", "warnings"), CASES)
def test_the_settings_a_log_shows(
    log: str,
    behaviour: dict[str, str],
    args: dict[str, Any],
    config: dict[str, str],
    warnings: list[str],
) -> None:
    found = _read(log)
    assert found.behaviour == behaviour
    assert {k: found.args.get(k) for k in args} == args
    assert {k: found.config.get(k) for k in config} == config
    assert all(w in found.warnings for w in warnings)
    # each warning once, across processes and launches; none that changes nothing
    assert len(found.warnings) == len(set(found.warnings))
    assert not any("ulimit" in w or "force killing" in w for w in found.warnings)
    # what names the server (model, paths, address) is left out of both
    for name in ("model", "model_tag", "tokenizer", "served_model_name", "host", "port"):
        assert name not in found.args and name not in found.config
    # nested reprs are left out, but the speculative config and the compilation modes
    assert not any("(" in v for k, v in found.config.items() if k != "speculative_config")


def test_a_log_without_vllm_settings_shows_none() -> None:
    assert effective.of_lines(logline.lines("$ my-server\nloading\nready\n")) is None


def test_an_argument_that_is_no_literal_is_kept_as_its_text() -> None:
    line = (
        "(APIServer pid=1) INFO 12-01 10:00:00 [api_utils.py:286] non-default args: "
        "{'max_num_seqs': 8, 'compilation_config': CompilationConfig(mode=3, level=None), "
        "'served_model_name': ('a', 'b')}"
    )
    found = effective.of_lines([logline.parse(1, line)])
    assert found is not None
    assert found.args == {
        "max_num_seqs": 8,
        "compilation_config": "CompilationConfig(mode=3, level=None)",
    }


def test_literals_become_what_a_record_keeps() -> None:
    line = "non-default args: {'a': (1, 2), 'b': {3, 1}, 'c': b'x', 'd': None, 'e': {'f': 1.5}}"
    found = effective.of_lines([logline.parse(1, line)])
    assert found is not None
    assert found.args == {"a": [1, 2], "b": [1, 3], "c": "b'x'", "d": None, "e": {"f": 1.5}}


@pytest.mark.parametrize(
    ("warning", "setting"),
    [
        (ASYNC_OFF, "async_scheduling"),
        (
            "Async scheduling will be disabled because it is not supported with the `ray` "
            "distributed executor backend. ",
            "async_scheduling",
        ),
        ("Model Runner V2 requires Triton; using the V1 model runner instead.", "model_runner"),
        ("Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup.", None),
    ],
)
def test_which_warnings_are_a_choice_of_the_engine(warning: str, setting: str | None) -> None:
    assert effective.explains_behaviour(warning) == setting


def test_a_draft_model_s_start_up_is_read_from_a_real_h200_log() -> None:
    """EAGLE-3 on vLLM 0.26 (one H200): the draft's own weights load after the target's
    ("Loading drafter model..."), and both models' memory is one figure; its head compiles
    after the target's backbone (19.26 + 9.61 s: the engine's "compilation: 28.87 s")."""
    found = effective.of_lines(logline.lines((LOGS / "h200-0.26-eagle3.log").read_text()))
    assert found is not None and len(found.startup) == 1
    assert found.startup[0] == {
        "weights_s": 0.08,
        "draft_weights_s": 0.01,
        "model_memory_gib": 0.27,
        "model_load_s": 0.583085,
        "compile_s": 19.26,
        "draft_compile_s": 9.61,
        "kv_cache_gib": 67.58,
        "graph_capture_s": 5.0,
        "graph_memory_gib": 0.38,
        "engine_init_s": 46.75,
    }
    assert "eagle3" in found.config["speculative_config"]


def test_each_launch_has_its_own_start_up_and_a_warm_compile_cache_shows() -> None:
    """The H200 baseline launched twice: the second compiled from the cache (18.93 s, then
    3.50 s); n-gram loads no draft weights although vLLM says it loads a drafter."""
    base = effective.of_lines(logline.lines((LOGS / "h200-0.26-baseline.log").read_text()))
    assert base is not None
    assert [s["compile_s"] for s in base.startup] == [18.93, 3.5]
    assert [s["engine_init_s"] for s in base.startup] == [42.56, 28.73]
    assert all("draft_weights_s" not in s for s in base.startup)
    ngram = effective.of_lines(logline.lines((LOGS / "h200-0.26-pinned-ngram.log").read_text()))
    assert (
        ngram is not None
        and "Loading drafter model..." in (LOGS / "h200-0.26-pinned-ngram.log").read_text()
    )
    assert ngram.startup == [
        {
            "weights_s": 0.09,
            "model_memory_gib": 0.25,
            "model_load_s": 0.615868,
            "compile_s": 3.46,
            "kv_cache_gib": 67.65,
            "graph_capture_s": 4.0,
            "graph_memory_gib": 0.33,
            "engine_init_s": 13.35,
        }
    ]


def test_each_worker_s_draft_is_its_own_and_a_launch_that_logged_nothing_keeps_its_place() -> None:
    """Two workers of one launch: the second's target weights, logged after the first's
    "Loading drafter model...", are still the target's, and the first's first torch.compile,
    logged after the second's, is the target's too; a launch that died before loading
    anything keeps its place, so the phases stay beside their launches' start-up times."""
    log = "\n".join(
        [
            "$ vllm serve m",
            "(Worker_TP0 pid=11) INFO 12-03 10:00:00 [l.py:1] Loading weights took 2.00 seconds",
            "(Worker_TP0 pid=11) INFO 12-03 10:00:01 [r.py:1] Loading drafter model...",
            "(Worker_TP1 pid=12) INFO 12-03 10:00:01 [l.py:1] Loading weights took 2.50 seconds",
            "(Worker_TP0 pid=11) INFO 12-03 10:00:02 [l.py:1] Loading weights took 0.10 seconds",
            "(Worker_TP1 pid=12) INFO 12-03 10:00:02 [r.py:1] Loading drafter model...",
            "(Worker_TP1 pid=12) INFO 12-03 10:00:03 [l.py:1] Loading weights took 0.20 seconds",
            "(Worker_TP1 pid=12) INFO 12-03 10:00:04 [m.py:1] torch.compile took 11.00 s in total",
            "(Worker_TP0 pid=11) INFO 12-03 10:00:04 [m.py:1] torch.compile took 10.00 s in total",
            "(Worker_TP1 pid=12) INFO 12-03 10:00:05 [m.py:1] torch.compile took 4.00 s in total",
            "(Worker_TP0 pid=11) INFO 12-03 10:00:05 [m.py:1] torch.compile took 3.00 s in total",
            "$ vllm serve m",
            "(APIServer pid=20) ERROR 12-03 10:01:00 [api.py:1] it died",
            "$ vllm serve m",
            "(Worker_TP0 pid=31) INFO 12-03 10:02:00 [l.py:1] Loading weights took 1.00 seconds",
        ]
    )
    found = effective.of_lines(logline.lines(log))
    assert found is not None
    assert found.startup == [
        {"weights_s": 2.0, "draft_weights_s": 0.1, "compile_s": 11.0, "draft_compile_s": 4.0},
        {},
        {"weights_s": 1.0},
    ]


def test_every_start_up_phase_it_reads_is_named_by_the_schema_and_the_page() -> None:
    from kbgen.site.render import STARTUP_WORDS

    read = {name for _, names in effective._STARTUP for name in names.values()}
    read |= set(effective._DRAFT.values())  # a draft model's, after "Loading drafter model"
    described = EffectiveSettings.model_fields["startup"].description or ""
    assert read == set(STARTUP_WORDS)
    assert all(f"`{name}`" in described for name in read)


def test_a_process_that_loaded_no_draft_compiles_only_the_target() -> None:
    """n-gram says "Loading drafter model..." and loads no weights: a second torch.compile of its
    process (one more graph of the target) is not a draft's."""
    log = "\n".join(
        [
            "$ vllm serve m --speculative-config ngram",
            "(EngineCore pid=7) INFO 12-03 10:00:00 [r.py:1] Loading drafter model...",
            "(EngineCore pid=7) INFO 12-03 10:00:01 [m.py:1] torch.compile took 5.00 s in total",
            "(EngineCore pid=7) INFO 12-03 10:00:02 [m.py:1] torch.compile took 2.00 s in total",
        ]
    )
    found = effective.of_lines(logline.lines(log))
    assert found is not None and found.startup == [{"compile_s": 5.0}]
