"""An imported record's setup: the files' settings, the spec's, and what neither says, unknown;
and records of one pair imported at two concurrencies answer two questions."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest

from kbgen.errors import Mismatch, UsageError
from kbgen.kb import questions, replications, store
from kbgen.kb.cards import Card
from kbgen.kb.models import Hypothesis, Record, Unknowable
from kbgen.record import compose
from kbgen.record.importers import arms, classify, guidellm, vllm_bench
from kbgen.run.spec import load as load_spec
from tests.support.imports import (
    BASE,
    CHAT_BASE,
    CHAT_NGRAM,
    CHAT_SPEC,
    FASTER,
    FIXTURES,
    GL_BASE,
    GL_NGRAM,
    H200_BASE,
    NGRAM,
    PROMPTS,
    SPEC,
    SPEC_OF,
    changed,
    set_at,
)


def _spec(
    tmp_path: Path, source: Path = CHAT_SPEC, top: dict[str, Any] | None = None, **workload: Any
) -> Path:
    """A copy of the spec at `source` with `top` and its workload's `workload` settings set."""
    data = store.load_fast(source)
    data.update(top or {})
    data["workload"].update(workload)
    path = tmp_path / f"spec-{len(list(tmp_path.glob('spec-*')))}.yaml"
    path.write_text(store.dump(data))
    return path


def _chat(
    spec: Path | None = CHAT_SPEC,
    files: tuple[Path, Path] = (CHAT_BASE, CHAT_NGRAM),
    allow_mismatch: bool = False,
    record_id: str = "x",
    prompts: Path = PROMPTS,
    hypothesis: Hypothesis = FASTER,
) -> Record:
    """A chat pair imported with `spec` and its prompt file (by default the CPU's)."""
    found = [vllm_bench.read(files[0], "baseline"), vllm_bench.read(files[1], "ngram")]
    suite = classify(found, prompts)
    record, _ = compose.from_imports(
        found,
        record_id,
        "X",
        hypothesis,
        allow_mismatch,
        suite=suite,
        spec=load_spec(spec) if spec else None,
    )
    return record


def test_the_setup_is_the_files_and_the_spec_s() -> None:
    record = _chat()
    spec = load_spec(CHAT_SPEC)
    assert record.config is not None and record.workload is not None
    config, workload = record.config, record.workload
    assert config.variants["ngram"].speculative_config == spec.variants["ngram"].speculative_config
    assert config.server_args == ["--enforce-eager", "--served-model-name", "tiny"]
    assert config.hardware.cpu == "Intel(R) Xeon(R) Processor" and config.hardware.host == "vm"
    # the files' own: the schedule, the endpoint, how usage was asked for, the token counts
    assert (workload.concurrency, workload.request_rate, workload.api) == (1, "inf", "chat")
    assert workload.usage == "final"
    assert workload.output_tokens is not None and workload.output_tokens.n == 32
    assert (workload.output_tokens.min, workload.output_tokens.max) == (32, 32)
    # what they do not keep, the spec's
    assert (workload.max_tokens, workload.temperature, workload.ignore_eos) == (32, 0, True)
    assert record.unknown == []
    assert record.provenance is not None
    assert "max_tokens 32, temperature 0.0, ignore_eos true as the spec says" in "\n".join(
        record.provenance.notes
    )
    assert questions.question_of(record) is not None


def test_without_a_spec_what_the_files_do_not_say_is_unknown() -> None:
    found = [vllm_bench.read(BASE, "baseline"), vllm_bench.read(NGRAM, "ngram")]
    record, _ = compose.from_imports(found, "x", "X", FASTER)
    assert record.unknown == [
        "config.hardware",
        "config.server_args",
        "config.server_env",
        "config.variants",
        "workload.prompt_suite",
        "workload.max_tokens",
        "workload.temperature",
        "workload.ignore_eos",
    ]
    assert record.workload is not None and record.workload.prompt_suite == "unknown"
    assert record.workload.concurrency == 1  # the file's
    assert questions.question_of(record) is None
    assert record.provenance is not None
    assert any(
        n.startswith("unknown, neither the files nor a spec say it")
        for n in record.provenance.notes
    )


def test_guidellm_without_a_spec_knows_its_data_but_neither_engine_nor_temperature() -> None:
    found = [guidellm.read(GL_BASE, "baseline"), guidellm.read(GL_NGRAM, "ngram")]
    record, _ = compose.from_imports(found, "x", "X", FASTER)
    assert record.config is not None and record.config.engine.name == "unknown"
    assert "config.engine" in record.unknown and "workload.temperature" in record.unknown
    assert (
        "workload.prompt_suite" not in record.unknown
        and "workload.max_tokens" not in record.unknown
    )


@pytest.mark.parametrize(
    ("workload", "said"),
    [
        ({"concurrency": 32}, "the spec says concurrency 32, the files 1"),
        ({"api": "completions"}, "the spec says api completions, the files chat"),
        ({"max_tokens": 48}, "max_tokens is 48 with ignore_eos, but the requests made 32 tokens"),
        ({"max_tokens": 16, "ignore_eos": False}, "max_tokens is 16, but requests made up to 32"),
    ],
    ids=["concurrency", "api", "forced-length", "past-max-tokens"],
)
def test_a_spec_the_files_contradict_is_a_mismatch(
    tmp_path: Path, workload: dict[str, Any], said: str
) -> None:
    spec = _spec(tmp_path, **workload)
    with pytest.raises(Mismatch, match=said):
        _chat(spec)
    allowed = _chat(spec, allow_mismatch=True)
    assert allowed.verdict is not None
    assert any(said in c and "--allow-mismatch" in c for c in allowed.verdict.caveats)
    assert allowed.workload is not None and allowed.workload.concurrency == 1  # the files'


def test_guidellm_s_unsent_temperature_contradicts_a_spec_s(tmp_path: Path) -> None:
    """GuideLLM's requests sent no temperature (the server's default): a spec's 0 is not what
    ran."""
    found = [guidellm.read(GL_BASE, "baseline"), guidellm.read(GL_NGRAM, "ngram")]
    spec = load_spec(_spec(tmp_path, SPEC))
    with pytest.raises(Mismatch, match=r"the spec says temperature 0\.0, the files none"):
        compose.from_imports(found, "x", "X", FASTER, spec=spec)


def test_no_max_concurrency_is_an_unknown_concurrency(tmp_path: Path) -> None:
    base, ngram = (
        changed(path, tmp_path / path.name, set_at("max_concurrency", None))
        for path in (CHAT_BASE, CHAT_NGRAM)
    )
    with pytest.raises(Mismatch, match="the spec says concurrency 1, the files none"):
        _chat(CHAT_SPEC, (base, ngram))
    record = _chat(None, (base, ngram))
    assert "workload.concurrency" in record.unknown
    assert record.workload is not None and record.workload.concurrency is None


@pytest.mark.parametrize(
    ("names", "spec", "message"),
    [
        (["baseline"], None, "only baseline=FILE: an import compares two variants"),
        ([], None, "no result file: an import compares two variants"),
        (["baseline"], SPEC, "the spec's variant(s) ngram have no result file: give ngram=FILE"),
        (["baseline", "ngram", "eagle"], SPEC, "the spec has no variant 'eagle'"),
        (["baseline", "baseline"], SPEC, "variant 'baseline' given more than once"),
    ],
    ids=["one-file", "no-file", "spec-variant-missing", "not-the-spec-s", "twice"],
)
def test_the_variants_an_import_needs(names: list[str], spec: Path | None, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        arms(names, load_spec(spec) if spec else None)


def test_the_spec_s_baseline_comes_first() -> None:
    assert arms(["ngram", "baseline"], load_spec(SPEC)) == ["baseline", "ngram"]
    assert arms(["ngram", "baseline"], None) == ["ngram", "baseline"]


H200_NGRAM, H200_PROMPTS = (
    FIXTURES / "h200-vllm-bench-chat-ngram.json",
    FIXTURES / "h200-prompts.jsonl",
)
H200 = {"accelerator": "NVIDIA H200", "count": 1, "accelerator_memory_gib": 140.4}
SIX = FASTER.model_copy(update={"min_prompts": 6})  # its prompt file holds 6 a class


def _disagreeing(tmp_path: Path, concurrency: int, record_id: str) -> list[Card]:
    """The H200 pair as it ran (n-gram slower: refuted), and with its files swapped (then
    supported), both imported as run at `concurrency` with the spec of the experiment."""
    spec = _spec(
        tmp_path,
        SPEC_OF[H200_BASE],
        {"hardware": H200},
        concurrency=concurrency,
        accept_time_confound=True,  # one run an arm, one after the other
    )
    base, ngram = (
        changed(
            path, tmp_path / f"c{concurrency}-{path.name}", set_at("max_concurrency", concurrency)
        )
        for path in (H200_BASE, H200_NGRAM)
    )
    return [
        Card.of(
            _chat(
                spec, files, record_id=f"{record_id}-{name}", prompts=H200_PROMPTS, hypothesis=SIX
            )
        )
        for name, files in (("as-run", (base, ngram)), ("swapped", (ngram, base)))
    ]


def test_two_imports_differing_only_in_concurrency_are_two_questions(tmp_path: Path) -> None:
    """The issue's case: the same question at concurrency 1 and at 32 is two questions, so two
    records that disagree across them contradict nothing; at one concurrency they do."""
    one, _ = _disagreeing(tmp_path, 1, "c1")
    _, thirty_two = _disagreeing(tmp_path, 32, "c32")
    # 6 prompts a class: coding's interval, one of the record's three, decides nothing
    math = [next(r.outcome for r in c.results if r.cls == "math") for c in (one, thirty_two)]
    assert math == ["refuted", "supported"]
    apart = replications.evidence([one, thirty_two])
    assert one.question and thirty_two.question and one.question != thirty_two.question
    assert len(apart.questions) == 2 and apart.contradictions == ()
    together = replications.evidence(_disagreeing(tmp_path, 1, "again"))
    assert len(together.questions) == 1 and together.contradictions


def test_two_imports_without_a_spec_are_no_question_however_alike() -> None:
    """Both lack the hardware and the variants' settings: they may differ in them."""
    found = [vllm_bench.read(CHAT_BASE, "baseline"), vllm_bench.read(CHAT_NGRAM, "ngram")]
    suite = classify(found, PROMPTS)
    cards = [Card.of(compose.from_imports(found, rid, "X", FASTER, suite=suite)[0]) for rid in "ab"]
    assert [c.question for c in cards] == [None, None]
    assert replications.evidence(cards).questions == {}


def test_every_unknowable_field_is_one_the_question_reads() -> None:
    read = {path for part in questions.ASKED for path in part.reads}
    assert read == set(get_args(Unknowable))


def test_what_is_unknown_is_not_written_as_an_empty_value() -> None:
    found = [vllm_bench.read(BASE, "baseline"), vllm_bench.read(NGRAM, "ngram")]
    record, _ = compose.from_imports(found, "x", "X", FASTER)
    written = record.model_dump(exclude_unset=True)
    assert "server_args" not in written["config"] and "server_env" not in written["config"]
    assert written["unknown"][:4] == [
        "config.hardware",
        "config.server_args",
        "config.server_env",
        "config.variants",
    ]


def test_a_setting_the_spec_does_not_write_is_unknown_not_kbgen_s_default(
    tmp_path: Path,
) -> None:
    """kbgen's own defaults (temperature 0, max_tokens 128, ignore_eos, the completions API)
    are what `kbgen bench` would send, not what another tool sent: a spec silent on them says
    nothing, and a chat file does not contradict it."""
    data = store.load_fast(CHAT_SPEC)
    for name in ("temperature", "max_tokens", "ignore_eos", "api", "concurrency"):
        del data["workload"][name]
    spec = tmp_path / "silent.yaml"
    spec.write_text(store.dump(data))
    record = _chat(spec)
    assert record.workload is not None
    assert {"workload.temperature", "workload.max_tokens", "workload.ignore_eos"} <= set(
        record.unknown
    )
    assert record.workload.api == "chat" and record.workload.concurrency == 1  # the files'
