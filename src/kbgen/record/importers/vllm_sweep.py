"""`vllm bench sweep serve`'s experiment folder as evidence: a variant per serve combination.

Each run file is read as `vllm_bench` reads one, and the parameters the sweep added to it say
what the run was: a serve combination is a variant, a bench combination a load level, a run a
round. See docs/design.md, "Sweeps of other tools".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field

from kbgen.errors import InvalidInput, Problem, UsageError
from kbgen.kb.files import json_fault, read_regular
from kbgen.kb.models import VARIANT_PATTERN
from kbgen.kb.numbers import Int
from kbgen.record.importers.imported import Imported
from kbgen.record.importers.reading import MAX_BYTES, Format, problem_at, read_format
from kbgen.record.importers.vllm_bench import VllmBenchResult
from kbgen.record.importers.vllm_bench import read as read_result

TOOL = "vllm bench sweep serve"
# The keys `vllm bench serve --save-result --save-detailed` writes itself (vLLM 0.26–0.32), and
# its summaries' (`p90_ttft_ms` with --metric-percentiles 90): any other key of a run file is a
# parameter the sweep added. The load parameters are the tool's own keys: they overwrite them.
RESULT_KEYS = frozenset(
    {
        *VllmBenchResult.model_fields,
        *("date", "endpoint_type", "label", "tokenizer_id", "request_goodput"),
        *("total_token_throughput", "start_times", "queue_times", "generated_texts"),
        *("max_output_tokens_per_s", "max_concurrent_requests", "rtfx"),
        *("spec_decode_acceptance_rate", "spec_decode_acceptance_length"),
    }
)
SUMMARY_KEY = re.compile(r"(?:mean|median|std|p\d+(?:\.\d+)?)_(?:ttft|tpot|itl|e2el)_ms")
RUN_FILE = re.compile(r"run=(\d+)\.json")
ROUNDS = (
    f"{TOOL} runs one serve combination after another (a server start each), every bench "
    "combination and run of one before the next: its runs are repeats inside one start, not "
    "interleaved rounds, so time is confounded with the variant"
)


class SweepRun(Format):
    """What `vllm bench sweep serve` added to a run's result file: its run number, and each
    parameter of its serve and bench combinations (kept with the tool's own keys, as extra)."""

    model_config = ConfigDict(extra="allow")

    run_number: Annotated[Int, Field(ge=-1)]

    def serve_parameters(self) -> dict[str, Any]:
        """The parameters the sweep added that are not the result's own keys: the serve
        combination's (`speculative_config`), its name (`_benchmark_name`) aside."""
        return {
            key: value
            for key, value in (self.model_extra or {}).items()
            if key not in RESULT_KEYS
            and key != "_benchmark_name"
            and not SUMMARY_KEY.fullmatch(key)
        }


@dataclass
class _Combination:
    """One combination folder: its variant, its runs, the serve parameters each states and the
    load they were sent at (as JSON, a key)."""

    path: Path
    variant: str
    runs: list[Imported]
    parameters: list[dict[str, Any]]
    load: str


def read(folder: Path, baseline: str | None = None) -> list[Imported]:
    """Every measured run of the experiment folder `folder` (`-o DIR -e NAME`: DIR/NAME), one
    import per serve combination, bench combination and run, the baseline's first: `baseline`
    (the spec's), else the serve combination without parameters, else the first."""
    combinations = [_combination(path, variant) for path, variant in _names(folder).items()]
    _consistent(folder, combinations)
    steps = sorted({c.load for c in combinations}, key=lambda key: _order(json.loads(key)))
    for c in combinations:
        for imported in c.runs:
            imported.step = steps.index(c.load)
    parameters = {c.variant: c.parameters[0] for c in combinations}
    order, why = _baseline_first(list(parameters), parameters, baseline)
    notes = [
        f"imported from the {TOOL} folder {folder.name}: {len(order)} serve combination(s) as the "
        f"variants, {len(steps)} bench combination(s) as the load levels, each run a round",
        ROUNDS,
        *(
            f"{variant}: serve parameters "
            + (json.dumps(params, sort_keys=True) if params else "none (the --serve-cmd as given)")
            for variant, params in parameters.items()
        ),
        why,
    ]
    warmups = sum((c.path / "warmup.json").exists() for c in combinations)
    if warmups:
        notes.append(f"warm-up runs (warmup.json, run -1) of {warmups} combination(s) not imported")
    out = []
    for variant in order:
        mine = [i for c in combinations if c.variant == variant for i in c.runs]
        mine.sort(key=lambda i: (i.step or 0, i.round or 0))
        _one_token_each(variant, mine)
        out += mine
    out[0].notes[:0] = notes  # the sweep's notes first, then each run's
    return out


def _combination(path: Path, variant: str) -> _Combination:
    """A combination folder's runs, which were sent at one load."""
    found = [_run(path, number, variant) for number in _listed(path)]
    first, load = found[0][0], _load(found[0][0])
    for imported, _ in found[1:]:
        source = imported.source or path
        if (mine := _load(imported)) != load:
            key = "max_concurrency" if "concurrency" in {*load, *mine} else "request_rate"
            message = (
                f"at {_words(mine)}, but {first.source} of the same combination is at "
                f"{_words(load)}"
            )
            raise InvalidInput([problem_at(source, (key,), message)])
    runs, parameters = [i for i, _ in found], [r.serve_parameters() for _, r in found]
    return _Combination(path, variant, runs, parameters, json.dumps(load))


def _consistent(folder: Path, combinations: list[_Combination]) -> None:
    """InvalidInput unless the runs of a serve combination all state the same serve parameters,
    and it runs every load, each in one combination folder."""
    firsts: dict[str, _Combination] = {}
    at: dict[tuple[str, str], _Combination] = {}
    for c in combinations:
        first = firsts.setdefault(c.variant, c)
        for run, parameters in zip(c.runs, c.parameters, strict=True):
            if parameters != first.parameters[0]:
                source, where = run.source or c.path, first.runs[0].source or first.path
                raise InvalidInput([_disagree(source, parameters, first.parameters[0], where)])
        other = at.setdefault((c.variant, c.load), c)
        if other is not c:
            message = (
                f"the same serve combination and load as {other.path.name} "
                f"({_words(json.loads(c.load))}): its bench parameters differ in a setting kbgen "
                "keeps no load level of (only max_concurrency and request_rate)"
            )
            raise InvalidInput([Problem(c.path, None, "", message)])
    for variant in firsts:
        for (_, load), c in at.items():
            if (variant, load) not in at:
                message = (
                    f"{variant}: no combination at {_words(json.loads(load))}, where "
                    f"{c.path.name} is: every serve combination runs every bench combination"
                )
                raise InvalidInput([Problem(folder, None, "", message)])


def _names(folder: Path) -> dict[Path, str]:
    """Each combination folder's variant: the name of its serve combination (`baseline` for a
    folder without one); a name that is no variant name (parameters written out, as the list
    form of --serve-params gives) becomes `serve-1`, `serve-2`, … in the folders' order."""
    combinations = sorted(
        path
        for path in (folder.iterdir() if folder.is_dir() else [])
        if path.is_dir() and path.name.startswith(("SERVE-", "BENCH-"))
    )
    if not combinations:
        message = (
            f"no combination folders (SERVE-…, BENCH-…): give the experiment folder {TOOL} wrote "
            "(-o DIR -e NAME: DIR/NAME)"
        )
        raise InvalidInput([Problem(folder, None, "", message)])
    labels: dict[Path, str] = {}
    unnamed: dict[str, str] = {}
    for path in combinations:
        name = path.name
        label = (
            name.removeprefix("SERVE--").split("-BENCH-")[0]
            if name.startswith("SERVE-")
            else "baseline"
        )
        if not re.fullmatch(VARIANT_PATTERN, label):
            label = unnamed.setdefault(label, f"serve-{len(unnamed) + 1}")
        labels[path] = label
    return labels


def _listed(combination: Path) -> list[int]:
    """The runs of a combination, as its summary.json lists them."""
    summary = combination / "summary.json"
    if not summary.exists():
        message = (
            f"missing: {TOOL} writes it after the combination's last run, so the combination did "
            "not finish (--resume runs it again)"
        )
        raise InvalidInput([Problem(summary, None, "", message)])
    try:
        data = json.loads(read_regular(summary, MAX_BYTES))
    except (ValueError, RecursionError) as exc:
        line = exc.lineno if isinstance(exc, json.JSONDecodeError) else None
        raise InvalidInput([Problem(summary, line, "", f"not JSON: {json_fault(exc)}")]) from exc
    runs = data if isinstance(data, list) else []
    numbers = [
        n for run in runs if isinstance(run, dict) and type(n := run.get("run_number")) is int
    ]
    if not numbers or len(numbers) != len(runs) or min(numbers) < 0:
        message = "not a list of the combination's runs, each with its run_number"
        raise InvalidInput([Problem(summary, 1, "", message)])
    return numbers


def _run(combination: Path, number: int, variant: str) -> tuple[Imported, SweepRun]:
    """Run `number` of a combination: its results, and what the sweep added to them."""
    path = combination / f"run={number}.json"
    if not path.exists():
        message = f"missing: summary.json lists run {number}"
        raise InvalidInput([Problem(path, None, "", message)])
    sweep = read_format(path, SweepRun)
    if sweep.run_number != number:
        message = f"is {sweep.run_number}, but summary.json lists this file as run {number}"
        raise InvalidInput([problem_at(path, ("run_number",), message)])
    imported = read_result(path, variant, f"{variant} ({combination.name}, run {number})")
    imported.round = number
    return imported, sweep


def _load(imported: Imported) -> dict[str, Any]:
    """The load a run's requests were sent at, as the record's load levels name it."""
    said = imported.said
    return {key: said[key] for key in ("concurrency", "request_rate") if said.get(key) is not None}


def _order(load: Mapping[str, Any]) -> tuple[float, float]:
    """Lighter loads first: by concurrency (unbounded last), then by request rate."""
    rate = load.get("request_rate", "inf")
    return (load.get("concurrency", float("inf")), float(rate))


def _words(load: Mapping[str, Any]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in load.items()) or "no load stated"


def _disagree(path: Path, mine: dict[str, Any], first: dict[str, Any], where: Path) -> Problem:
    """The first serve parameter a run file disagrees with its serve combination's first on."""
    key = next(k for k in [*mine, *first] if mine.get(k) != first.get(k))
    said = "absent" if key not in mine else json.dumps(mine[key], sort_keys=True)
    other = "absent" if key not in first else json.dumps(first[key], sort_keys=True)
    message = f"{said}, but {where} of the same serve combination has {other}"
    return problem_at(path, (key,), message) if key in mine else Problem(path, None, key, message)


def _baseline_first(
    variants: list[str], parameters: dict[str, dict[str, Any]], baseline: str | None
) -> tuple[list[str], str]:
    """The variants, the baseline first, and a note saying which it is and why."""
    if baseline is not None:
        chosen, why = baseline, "the spec's baseline"
    else:
        plain = [v for v in variants if not parameters[v]]
        chosen = plain[0] if plain else variants[0]
        why = (
            "the serve combination without serve parameters"
            if plain
            else "the first serve combination (every one has serve parameters; --spec names the "
            "baseline)"
        )
    if chosen not in variants:
        raise UsageError(
            f"the spec's baseline {chosen!r} is no serve combination of the sweep (its "
            f"combinations: {', '.join(variants)})"
        )
    return [chosen, *(v for v in variants if v != chosen)], f"the baseline is {chosen}: {why}"


def _one_token_each(variant: str, runs: list[Imported]) -> None:
    """No per-token ITL for a variant unless every chunk of every run held one token: of the
    runs whose chunks did, alone, it would be biased (as `vllm_bench` reasons for one file)."""
    done = [s for run in runs for s in run.samples if s.ok]
    if any(s.chunk_tokens for s in done) and not all(s.chunk_tokens for s in done):
        for s in done:
            s.chunk_tokens = []
        runs[0].notes.append(
            f"{variant}: in some runs the chunks did not hold one token each: no per-token ITL "
            "for this variant in any (chunk gaps kept)"
        )
