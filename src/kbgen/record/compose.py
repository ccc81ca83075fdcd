"""A record composed from its evidence: from a complete run folder, or from other tools' results.

Composing is pure: it reads the run (or takes the imported results), refuses variants that
cannot be compared fairly unless allowed, and returns the `Record` with its measurements,
speculative-decoding figures and verdict, plus the evidence to keep beside it. What a record
sets is what it shows: fields left unset are not written (`write`).
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

from kbgen import __version__
from kbgen.bench.effective import of_folder
from kbgen.errors import InvalidInput, Mismatch, Problem, UsageError
from kbgen.kb.models import (
    Arrivals,
    Config,
    Cost,
    Engine,
    Hardware,
    Hypothesis,
    Machine,
    MeasuredMetric,
    MetricStats,
    ModelInfo,
    Provenance,
    RawSamples,
    Record,
    Status,
    Workload,
    baseline_first,
)
from kbgen.record import confounds, cost, figures, schedule, verdict
from kbgen.record import importers as imports
from kbgen.record.evidence import Evidence, evidence_of_run
from kbgen.run.counters import Counters, SpecDecodeCounters
from kbgen.run.design import Stored, design_of
from kbgen.run.folder import RunFolder
from kbgen.run.models import RunMeta, pooled
from kbgen.run.spec import ClusterSpec, ExperimentSpec, WorkloadSpec, recorded

SAMPLES_SUFFIX = ".samples.jsonl.gz"
NO_GIT = "the spec was not in a git repository (or git was not installed): no spec commit recorded"
NO_KBGEN_COMMIT = (
    "kbgen's commit is unknown: its code was neither in a git checkout nor installed from a VCS "
    "commit (direct_url.json), so only its version is recorded"
)


def comparability(meta: RunMeta, order: list[str]) -> list[str]:
    """Differences between variants that make a comparison unfair."""
    problems = []
    for key, what in (("engine_version", "engine version"), ("model", "model")):
        seen = {v: getattr(meta.variants[v], key) for v in order if v in meta.variants}
        if len(set(seen.values())) > 1:
            problems.append(f"{what} differs: " + ", ".join(f"{v}={x}" for v, x in seen.items()))
    return problems


# The spec's workload fields a record keeps as they ran: those both declare, but the design's
# and the arrivals (every open loop's, the default Poisson process too: `_arrivals`)
DESIGN = frozenset({"rounds", "order_seed", "stop", "max_minutes", "accept_time_confound"})
AS_RUN = (set(Workload.model_fields) & set(WorkloadSpec.model_fields)) - DESIGN - {"arrivals"}


def _arrivals(spec: ExperimentSpec) -> dict[str, Any]:
    """How an open loop's requests arrived, said even where the spec left the default."""
    timed = spec.open_loop and spec.workload.trace is None  # a trace's times are its own
    return {"arrivals": spec.workload.arrivals or Arrivals()} if timed else {}


def _unsaid(workload: WorkloadSpec) -> set[str]:
    """What a record leaves out: `max_tokens` where each request asked for its own output
    (synthetic, a trace); `reset_prefix_cache` unless it was."""
    own = {"max_tokens"} if workload.synthetic or workload.trace else set()
    return own | (set() if workload.reset_prefix_cache else {"reset_prefix_cache"})


def _design(workload: WorkloadSpec, order: list[Stored] | None) -> dict[str, Any]:
    """The workload's design as the record keeps it: its rounds and order (nothing for one
    round), and only what differs from a fixed design's."""
    rounds = (
        {}
        if workload.rounds == 1
        else {"rounds": workload.rounds, "order_seed": workload.order_seed, "order": order}
    )
    return rounds | figures.known(
        stop=workload.stop if design_of(workload) else None,
        max_minutes=workload.max_minutes,
        accept_time_confound=workload.accept_time_confound or None,
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def from_run(
    run: RunFolder,
    record_id: str,
    allow_mismatch: bool = False,
    hypothesis: Hypothesis | None = None,
) -> tuple[Record, Evidence]:
    """The record and its evidence for a complete run folder (the spec's hypothesis unless
    `hypothesis`, a planned record's own)."""
    meta = run.meta()
    if meta.status != "complete":
        raise UsageError(
            f"{run.path}: the run is {meta.status!r}, not complete; finish it first with "
            f"kbgen bench --resume {run.path}"
        )
    spec = run.spec()
    order = baseline_first(spec.baseline, spec.variants)
    parts = run.blocks()
    metas = [part.meta() for part in parts]
    if parts:
        meta = pooled(meta, metas)
        unlike = _unlike(metas)
        if unlike and not allow_mismatch:
            raise Mismatch(
                f"{run.path}: its blocks ran on different hardware ({unlike}): pooled, they "
                "answer no one question; run an experiment per kind of machine "
                "(cluster.resources pins one), or use --allow-mismatch"
            )
    missing = [v for v in order if v not in meta.variants]
    if missing:
        raise UsageError(f"{run.path}: no measurements for variant(s) {', '.join(missing)}")
    differences = comparability(meta, order)
    if differences and not allow_mismatch:
        raise Mismatch(
            f"{run.path}: not comparable: {'; '.join(differences)} "
            "(use --allow-mismatch to compare anyway; the record will say so)"
        )
    caveats = [f"compared despite: {d} (--allow-mismatch)" for d in differences]
    hypothesis = hypothesis or spec.hypothesis
    if hypothesis != spec.hypothesis:
        caveats.append("the record's hypothesis differs from the spec's; the record's was used")
    evidence = evidence_of_run(run, spec)
    if evidence.torn:
        caveats.append(
            f"{evidence.torn} line(s) of the run's samples.jsonl were torn by a kill mid-write "
            "and dropped (their requests were sent again on the resume)"
        )
    effective = {
        v: e
        for v in order
        if (e := next(filter(None, (of_folder(f, v) for f in parts or [run])), None)) is not None
    }
    caveats += confounds.caveats(spec.baseline, spec.variants, effective)
    kept = schedule.kept(evidence)
    caveats += schedule.caveats(kept)
    startup_s = {  # to a tenth of a second: a start-up takes seconds to hours
        v: [round(s, 1) for s in meta.variants[v].startup_s]
        for v in order
        if meta.variants[v].startup_s
    }
    drafts = {v: d for v in order if (d := meta.variants[v].draft) is not None}
    first = meta.variants[spec.baseline]
    workload = spec.workload
    design = design_of(workload)
    hardware = meta.hardware or Hardware()
    record = Record(
        schema_version=1,
        id=record_id,
        title=spec.title,
        status=Status.CONCLUDED,
        created=dt.date.today(),
        concluded=dt.date.today(),
        hypothesis=hypothesis,
        config=Config(
            engine=Engine(name="vllm", version=first.engine_version),
            model=ModelInfo(name=first.model),
            hardware=hardware,
            **figures.known(software=meta.software),
            server_args=list(getattr(spec.server, "args", [])),
            **figures.known(server_env=dict(getattr(spec.server, "env", {})) or None),
            baseline=spec.baseline,
            variants={name: recorded(v) for name, v in spec.variants.items()},
            **figures.known(sweep=dict(spec.sweep) or None),
        ),
        workload=Workload(
            prompt_suite=meta.prompt_suite,
            **figures.known(prompt_suite_sha256=meta.prompt_suite_sha256),
            **workload.model_dump(include=AS_RUN - _unsaid(workload), exclude_none=True),
            **_arrivals(spec),
            **_design(workload, meta.order),
            **figures.known(loads=spec.loads if len(spec.loads) > 1 else None),
        ),
        measurements=figures.measurements(evidence),
        **figures.known(by_load=figures.by_load(evidence) or None),
        spec_decode=figures.spec_decode(evidence),
        **figures.known(prefix_cache=figures.prefix_cache(evidence) or None),
        **figures.known(schedule=kept or None),
        verdict=verdict.judge(
            evidence,
            hypothesis,
            caveats,
            temperature=workload.temperature,
            design=design,
            time_confound_ok=workload.accept_time_confound,
            refusals=confounds.drafting(spec.variants, evidence.windows),
        ),
        resolves=list(spec.resolves),
        tags=list(spec.tags),
        provenance=Provenance(
            source="measured",
            tool=f"kbgen {__version__}",
            recorded_at=_now(),
            run=run.path.name,
            **figures.known(
                kbgen=meta.kbgen,
                git_sha=meta.git_sha,
                git_changed=meta.git_changed if meta.git_sha else None,
                spec_in_kbgen_checkout=meta.spec_in_kbgen_checkout if meta.git_sha else None,
                host=meta.host_label or hardware.host,
                notes=_code_notes(meta) or None,
            ),
        ),
        raw_samples=RawSamples(path=f"{record_id}{SAMPLES_SUFFIX}"),
        **figures.known(
            effective=effective or None, startup_s=startup_s or None, drafts=drafts or None
        ),
        cost=_cost(meta, metas, evidence, design is not None, spec.cluster),
        **figures.known(machines=_machines(run, metas, evidence) or None),
    )
    return record, evidence


def _unlike(metas: list[RunMeta]) -> str:
    """How the blocks' machines differ, their labels and which of a node's GPUs aside ('' when
    alike)."""
    kinds = {
        (m.hardware or Hardware())
        .model_copy(update={"host": None, "devices": None})
        .model_dump_json()
        for m in metas
    }
    if len(kinds) < 2:
        return ""
    return "; ".join(
        f"block {i}: {(m.hardware or Hardware()).accelerator or (m.hardware or Hardware()).cpu}"
        for i, m in enumerate(metas)
    )


def _cost(
    meta: RunMeta,
    metas: list[RunMeta],
    evidence: Evidence,
    stopping: bool,
    cluster: ClusterSpec | None,
) -> Cost:
    """The run's cost; a run over several machines, its blocks' costs added up, each block's
    accelerator time by the GPUs it held (`cluster.num_gpus`)."""
    if not metas:
        return cost.cost_of(meta, evidence.samples, meta.hardware, stopping)
    held = cluster.num_gpus if cluster is not None else None
    return cost.pooled(
        [
            cost.cost_of(
                m, [s for s in evidence.samples if s.block == i], m.hardware, stopping, held
            )
            for i, m in enumerate(metas)
        ],
        math.ceil(len(metas) * held) if held else None,
    )


def _machines(run: RunFolder, metas: list[RunMeta], evidence: Evidence) -> list[Machine]:
    """Each block's machine and nodes (none for a run on one machine)."""
    cluster = run.meta().cluster
    if cluster is None:
        return []
    return [
        Machine(
            block=i,
            **figures.known(hardware=m.hardware, software=m.software),
            nodes=[p.named for p in b.placements],
            requests=sum(1 for s in evidence.samples if s.block == i),
        )
        for i, (m, b) in enumerate(zip(metas, cluster.blocks, strict=True))
    ]


def _code_notes(meta: RunMeta) -> list[str]:
    """What the record cannot say about the code that ran: no spec commit, no kbgen commit."""
    notes = [] if meta.git_sha else [NO_GIT]
    if meta.kbgen.commit is None:
        notes.append(NO_KBGEN_COMMIT)
    return notes


def from_imports(
    found: list[imports.Imported],
    record_id: str,
    title: str,
    hypothesis: Hypothesis,
    allow_mismatch: bool = False,
    allow_summary_only: bool = False,
    resolves: list[str] | None = None,
    tags: list[str] | None = None,
    suite: imports.Suite | None = None,
    spec: ExperimentSpec | None = None,
    accept_time_confound: bool = False,
) -> tuple[Record, Evidence | None]:
    """The record from imported results, one per variant, or per variant, sweep step and run of
    a sweep (`imports.load_levels` makes its load levels); the spec's baseline first, else the first
    given; with the evidence when every variant has per-request samples. Its classes are the
    `suite`'s (`imports.classify` gave the samples theirs), else the one class `all`; its setup
    is the files' and the `spec`'s (`imports.setup_of`), and what neither says is unknown;
    `accept_time_confound` accepts one round, as the spec's workload can."""
    order = imports.arms(list(dict.fromkeys(i.variant for i in found)), spec)
    found = sorted(found, key=lambda i: order.index(i.variant))
    loads, level_notes = imports.load_levels(found)
    differences = []
    seen: dict[str, Any] = {i.variant: i.model for i in found}
    if len(set(seen.values())) > 1:
        differences.append("model differs: " + ", ".join(f"{v}={x}" for v, x in seen.items()))
    for name in sorted({k for i in found for k in [*i.workload, *i.said]}):
        seen = {i.variant: i.said.get(name, i.workload.get(name)) for i in found}
        if len(set(map(str, seen.values()))) > 1:
            differences.append(
                f"workload {name} differs: " + ", ".join(f"{v}={x}" for v, x in seen.items())
            )
    setup = imports.setup_of(found, order, spec, suite, loads, accept_time_confound)
    differences += setup.differences
    if differences and not allow_mismatch:
        raise Mismatch(
            f"not comparable: {'; '.join(differences)} (use --allow-mismatch to "
            "compare anyway; the record will say so)"
        )
    caveats = [f"compared despite: {d} (--allow-mismatch)" for d in differences]
    with_samples = all(any(s.ok for i in found if i.variant == v for s in i.samples) for v in order)
    if len(loads) > 1 and not with_samples:
        lacking = next(i for i in found if not any(s.ok for s in i.samples))
        raise InvalidInput(
            [
                Problem(
                    lacking.source or Path(lacking.variant),
                    None,
                    "",
                    "no per-request samples: a sweep is judged at each load level from its "
                    "requests (vllm bench serve: --save-detailed)",
                )
            ]
        )
    # before the evidence is built: it sets the prompt_index the verdict pairs arms by
    paired, note = imports.pair_prompts(found) if with_samples else (True, "")
    pairing = [note] if note else []
    classes = setup.workload.classes
    evidence = Evidence(
        order[0],
        order,
        classes,
        [s for i in found for s in i.samples],
        _windows(found),
        paired=paired,
        request_rate=rate if isinstance(rate := setup.workload.request_rate, float) else None,
        loads=loads,
    )
    kept = schedule.kept(evidence) if with_samples else []
    caveats += schedule.caveats(kept)
    if with_samples:
        measurements = figures.measurements(evidence)
        # at temperature 0 the arms' outputs are compared, as `kbgen record --check` will
        decided = verdict.judge(
            evidence,
            hypothesis,
            caveats,
            temperature=setup.workload.temperature,
            time_confound_ok=bool(setup.workload.accept_time_confound),
            refusals=confounds.drafting(setup.config.variants, evidence.windows),
        )
    else:
        measurements = {i.variant: {imports.ALL: _metric_stats(i)} for i in found}
        decided = verdict.judge_means(
            evidence, measurements, hypothesis, caveats, allow_summary_only
        )
    tools = sorted({f"{i.tool} {i.version}" if i.version else i.tool for i in found})
    record = Record(
        schema_version=1,
        id=record_id,
        title=title,
        status=Status.CONCLUDED,
        created=dt.date.today(),
        concluded=dt.date.today(),
        hypothesis=hypothesis,
        config=setup.config,
        workload=setup.workload,
        **figures.known(unknown=setup.unknown or None),
        measurements=measurements,
        **figures.known(by_load=(figures.by_load(evidence) if with_samples else None) or None),
        spec_decode=figures.spec_decode(evidence),
        **figures.known(schedule=kept or None),
        verdict=decided,
        resolves=resolves or [],
        tags=tags or [],
        provenance=Provenance(
            source="imported",
            tool=f"kbgen {__version__}",
            reference=", ".join(tools),
            recorded_at=_now(),
            **figures.known(host=spec.host_label if spec else None),
            notes=list(
                dict.fromkeys(
                    [n for i in found for n in i.notes] + level_notes + pairing + setup.notes
                )
            ),
        ),
        **figures.known(
            raw_samples=RawSamples(path=f"{record_id}{SAMPLES_SUFFIX}") if with_samples else None
        ),
    )
    return record, evidence if with_samples else None


def _windows(found: list[imports.Imported]) -> dict[str, list[Counters]]:
    """The speculative-decoding counters the tools scraped, one window per file (per sweep
    level and run), by variant."""
    out: dict[str, list[Counters]] = {}
    for i in found:
        if i.spec_decode:
            out.setdefault(i.variant, []).append(
                Counters(
                    spec_decode=SpecDecodeCounters.model_validate(i.spec_decode),
                    **figures.known(
                        client_output_tokens=i.output_tokens, level=i.level, round=i.round
                    ),
                )
            )
    return out


def _metric_stats(imported: imports.Imported) -> dict[MeasuredMetric, MetricStats]:
    return {metric: figures.metric_stats(values) for metric, values in imported.stats.items()}
