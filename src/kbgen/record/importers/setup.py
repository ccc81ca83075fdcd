"""The setup of an imported record: what the tools' files say, what a spec adds, what is unknown.

A setting the files state is theirs, and a spec that says otherwise is a difference (refused
unless allowed); one they do not state is the spec's, where one is given; the rest is recorded
as unknown (`Record.unknown`), never as an empty value another record's empty value matches.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from kbgen.errors import UsageError
from kbgen.kb.models import (
    UNKNOWN,
    Config,
    Engine,
    Hardware,
    Load,
    ModelInfo,
    TokenCounts,
    Unknowable,
    Variant,
    Workload,
    baseline_first,
)
from kbgen.record.importers.classes import Suite
from kbgen.record.importers.imported import ALL, Imported
from kbgen.run.spec import ExperimentSpec, recorded

# The workload's settings a file may state or a spec give, in the order the record lists them:
# those the question reads (`Unknowable`), but the prompt suite, which the prompts file says
SETTINGS: tuple[str, ...] = tuple(
    path.removeprefix("workload.")
    for path in get_args(Unknowable)
    if path.startswith("workload.") and path != "workload.prompt_suite"
)
# Those a spec gives: its workload is what the experiment sends, whichever tool sent it; how a
# tool asks for token counts and how fast it starts requests are the tool's own
FROM_SPEC = ("concurrency", "max_tokens", "temperature", "api", "ignore_eos")
SIGNIFICANT = 6  # digits of a mean token count, as the record's other figures


@dataclass(frozen=True)
class Setup:
    """An imported record's configuration and workload, what of them is unknown, where the
    files and the spec disagree, and the notes that say where each setting came from."""

    config: Config
    workload: Workload
    unknown: list[Unknowable]
    differences: list[str]
    notes: list[str]


def arms(names: list[str], spec: ExperimentSpec | None) -> list[str]:
    """The variants of an import of result files named `names`, the baseline first: the spec's
    variants, each with its file, where a spec is given; else at least two. UsageError, saying
    which variant has no file (or which file no variant of the spec), otherwise."""
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"variant {', '.join(map(repr, twice))} given more than once")
    if spec is None:
        if len(names) < 2:
            given = f"only {names[0]}=FILE" if names else "no result file"
            raise UsageError(
                f"{given}: an import compares two variants, the baseline first: "
                "BASELINE=FILE VARIANT=FILE"
            )
        return names
    extra = [name for name in names if name not in spec.variants]
    if extra:
        raise UsageError(
            f"the spec has no variant {', '.join(map(repr, extra))} (its variants: "
            f"{', '.join(spec.variants)})"
        )
    missing = [name for name in spec.variants if name not in names]
    if missing:
        files = " ".join(f"{name}=FILE" for name in missing)
        raise UsageError(
            f"the spec's variant(s) {', '.join(missing)} have no result file: give {files}"
        )
    return baseline_first(spec.baseline, names)


def setup_of(
    found: list[Imported],
    order: list[str],
    spec: ExperimentSpec | None,
    suite: Suite | None,
    loads: list[Load] | None = None,
    accept_time_confound: bool = False,
) -> Setup:
    """The setup of the imports `found`, whose variants are `order` (the baseline first), with
        the settings `spec` gives (where one is given), the prompt file `suite` the requests took
        their classes from and a sweep's load levels (`levels`); one round accepted where the spec
    or `accept_time_confound` (the command line's) says so."""
    loads = loads if loads and len(loads) > 1 else None
    tools = {i.tool for i in found}
    engine = "vllm" if spec is not None or tools == {"vllm bench serve"} else UNKNOWN
    model = found[0].model or UNKNOWN
    hardware = (spec.hardware if spec else None) or Hardware()
    if spec is not None and spec.hardware is not None and spec.host_label is not None:
        hardware = hardware.model_copy(update={"host": spec.host_label})
    unknown: set[str] = {
        path
        for path, known in (
            ("config.engine", engine != UNKNOWN),
            ("config.model", model != UNKNOWN),
            ("config.hardware", hardware != Hardware()),
            ("config.server_args", spec is not None),
            ("config.server_env", spec is not None),
            ("config.variants", spec is not None),
        )
        if not known
    }
    config = Config(
        engine=Engine(name=engine),
        model=ModelInfo(name=model),
        hardware=hardware,
        # unset without a spec (and `unknown`): a record shows what it sets
        **({"server_args": list(getattr(spec.server, "args", []))} if spec else {}),
        **_known(server_env=dict(getattr(spec.server, "env", {})) or None if spec else None),
        baseline=order[0],
        variants={name: recorded(spec.variants[name]) if spec else Variant() for name in order},
        **_known(sweep=dict(spec.sweep) or None if spec else None),
    )
    settings, differences, from_spec = _settings(found, spec)
    tokens = {key: _pooled([i.tokens[key] for i in found if key in i.tokens]) for key in TOKENS}
    differences += _lengths(settings, tokens["output_tokens"])
    if spec is not None and len(spec.loads) > 1 and spec.loads != (loads or [{}]):
        differences.append(f"the spec's load levels are {spec.loads}, the files' {loads or [{}]}")
    unknown |= {f"workload.{name}" for name in SETTINGS if settings.get(name) is None}
    datasets = {i.dataset for i in found}
    dataset = datasets.pop() if len(datasets) == 1 else None
    if suite is None and dataset is None:
        unknown.add("workload.prompt_suite")
    processes = [i.said["arrivals"] for i in found if "arrivals" in i.said]
    arrivals = processes[0] if processes and all(p == processes[0] for p in processes) else None
    if arrivals is not None:
        notes_first = ["the arrival process as the tools' files say; its seed they do not keep"]
    else:
        notes_first = []
    workload = Workload(
        prompt_suite=_suite_name(suite.path) if suite else dataset or UNKNOWN,
        **_known(arrivals=arrivals),
        **_known(prompt_suite_sha256=suite.sha256 if suite else None),
        classes=suite.classes if suite else [ALL],
        **_known(**settings, **tokens, loads=loads),
        **_known(
            accept_time_confound=accept_time_confound
            or (spec is not None and spec.workload.accept_time_confound)
            or None
        ),
    )
    notes = notes_first
    if from_spec:
        said = ", ".join(f"{name} {_words(settings[name])}" for name in from_spec)
        notes.append(f"{said} as the spec says: the tools' files do not say")
    listed = [path for path in get_args(Unknowable) if path in unknown]
    if listed:
        hint = "" if spec is not None else " (--spec gives the variants' settings and more)"
        notes.append(
            f"unknown, neither the files nor a spec say it: {', '.join(listed)}{hint}; a record "
            "with an unknown setting answers no question"
        )
    return Setup(config, workload, listed, differences, notes)


TOKENS = ("input_tokens", "output_tokens")


def _settings(
    found: list[Imported], spec: ExperimentSpec | None
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Each workload setting (None: unknown), where the files and the spec disagree, and the
    settings taken from the spec. The variants' files agree, or `compose` says they differ."""
    settings: dict[str, Any] = {}
    differences, from_spec = [], []
    # what the spec writes, not kbgen's defaults: a default is no word on what a tool sent
    given = spec.workload.model_dump(exclude_unset=True) if spec is not None else {}
    for name in SETTINGS:
        stated = [i.said[name] for i in found if name in i.said]
        if stated:
            settings[name] = stated[0]
            if name in FROM_SPEC and name in given and given[name] != stated[0]:
                differences.append(
                    f"the spec says {name} {_words(given[name])}, the files {_words(stated[0])}"
                )
        elif name in FROM_SPEC and name in given:
            settings[name] = given[name]
            from_spec.append(name)
    return settings, differences, from_spec


def _lengths(settings: dict[str, Any], output: TokenCounts | None) -> list[str]:
    """Where the requests' output lengths contradict the output length asked for: more tokens
    than max_tokens, or with ignore_eos another number than max_tokens."""
    limit, forced = settings.get("max_tokens"), settings.get("ignore_eos")
    if limit is None or output is None:
        return []
    made = (output.min, output.max) if output.min is not None else (output.mean, output.mean)
    if forced and made != (limit, limit):
        return [
            f"max_tokens is {limit} with ignore_eos, but the requests made {_range(*made)} tokens"
        ]
    if made[1] > limit:
        return [f"max_tokens is {limit}, but requests made up to {_range(*made)} tokens"]
    return []


def _range(low: float, high: float) -> str:
    return f"{low:g}" if low == high else f"{low:g} to {high:g}"


def _pooled(counts: list[TokenCounts]) -> TokenCounts | None:
    """The token counts of every variant's requests together."""
    n = sum(c.n for c in counts)
    if not n:
        return None
    mean = sum(c.mean * c.n for c in counts) / n
    lows, highs = [c.min for c in counts], [c.max for c in counts]
    return TokenCounts(
        n=n,
        mean=float(f"{mean:.{SIGNIFICANT}g}"),
        min=None if None in lows else min(c for c in lows if c is not None),
        max=None if None in highs else max(c for c in highs if c is not None),
    )


def _words(value: Any) -> str:
    """A setting as the record's YAML writes it: `true`, `0.0`, `inf`, `chat`; `none` for no
    fixed value (no --max-concurrency, a setting the requests differ in)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _known(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _suite_name(path: Path) -> str:
    """A prompt file as a record names it: from the current folder when inside it (no machine's
    absolute path on a published record), else by its name."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.name
