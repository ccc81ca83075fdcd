"""The `kbgen` command line: parse, make one library call, print.

Errors are mapped to exit codes here and only here (`EXIT_CODES`): a KbgenError prints its
message — one line per problem, secrets masked — and never a traceback. Each command imports its
stage when it runs, so a command pays only for what it uses: `kbgen render` with nothing to do
imports no YAML, Pydantic or Jinja.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kbgen import __version__, redact
from kbgen.errors import (
    Conflict,
    InvalidInput,
    KbgenError,
    Problem,
    ServerError,
    StoreError,
    TemplateError,
    UsageError,
)
from kbgen.kb import files

if TYPE_CHECKING:
    from kbgen.kb.loading import KnowledgeBase

# Checked in order; the first class that matches decides the exit code.
EXIT_CODES: list[tuple[type[KbgenError], int]] = [
    (InvalidInput, 1),  # the input is wrong: fix the file named in the message
    (UsageError, 2),  # the command line is wrong (click uses 2 for its own usage errors too)
    (Conflict, 3),  # someone else changed the file: re-run
    (StoreError, 4),  # the disk refused
    (ServerError, 5),  # the LLM server could not be started or reached, or died
    (TemplateError, 1),  # a template is wrong or refused: fix the FILE:LINE named
    (KbgenError, 1),
]


def exit_code(exc: KbgenError) -> int:
    return next(code for cls, code in EXIT_CODES if isinstance(exc, cls))


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KbgenError as exc:
            for line in _shown(exc):
                click.echo(line if isinstance(exc, InvalidInput) else f"error: {line}", err=True)
            if isinstance(exc, InvalidInput):
                files = len({p.path for p in exc.problems})
                noun = "problem" if len(exc.problems) == 1 else "problems"
                click.echo(f"{len(exc.problems)} {noun} in {files} file(s)", err=True)
            ctx.exit(exit_code(exc))


def _shown(exc: KbgenError) -> list[str]:
    """An error's lines, secrets masked. A problem's parts are masked each alone: a file or a
    field named like a secret (`plans/auth-proxy.yaml`, `auth:`) is no secret, and masked with
    what follows it the line would lose its line number or its message."""
    if isinstance(exc, InvalidInput):
        return [
            str(
                replace(
                    p,
                    path=Path(redact.text(str(p.path))),
                    field=redact.text(p.field),
                    message=redact.text(p.message),
                )
            )
            for p in exc.problems
        ]
    return redact.text(str(exc)).splitlines() or [type(exc).__name__]


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kbgen")
def cli() -> None:
    """kbgen: inference experiments in, a decision-record knowledge base out.

    \b
    Example:
      kbgen new "n-gram speculative decoding on SmolLM2"
      kbgen validate records/
    """


DEFAULT_RECORDS = Path("records")
CACHE = Path(".kbgen_cache") / "validate.json"


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--root",
    type=click.Path(path_type=Path),
    default=DEFAULT_RECORDS,
    show_default=True,
    help="The knowledge base that references are resolved against.",
)
@click.option(
    "--cache/--no-cache",
    default=True,
    show_default=True,
    help=f"Skip files that were valid and are unchanged since the last run ({CACHE}).",
)
def validate(paths: tuple[Path, ...], root: Path, cache: bool) -> None:
    """Validate records and plans; report every problem as FILE:LINE: FIELD: MESSAGE.

    Checks each file against the schema, then the references between them: plan tasks a
    record resolves, records it supersedes or relates to, duplicate ids. Exit 0 when clean,
    1 when anything is invalid, 2 on a usage error.

    \b
    Example:
      kbgen validate                      # everything under records/
      kbgen validate records/2026-11-29-ngram.yaml
    """
    from kbgen.kb import loading as kb

    targets = list(paths) or [root]
    for path in targets:
        if not path.exists():
            raise UsageError(f"{path}: no such file or folder")
    wanted = files.iter_yaml_files(targets)
    context = files.iter_yaml_files([root]) if root.is_dir() else []
    base = kb.load_facts(sorted({*wanted, *context}), cache=CACHE if cache else None)
    asked = set(wanted)
    problems = [p for p in base.problems if p.path in asked]
    if problems:
        raise InvalidInput(problems)
    kinds = [base.facts[path].kind for path in wanted if path in base.facts]
    records, plans = kinds.count("record"), kinds.count("plan")
    click.echo(f"ok: {records} record(s) and {plans} plan(s) valid")


@cli.command(name="list")
@click.argument("root", default=DEFAULT_RECORDS, type=click.Path(path_type=Path, exists=True))
@click.option(
    "--stale",
    is_flag=True,
    help="Only the records measured on an older engine version than a comparable record.",
)
def list_records(root: Path, stale: bool) -> None:
    """List records with status, verdict and title, newest first.

    With --stale, name the records whose evidence is stale: a record of the same question
    (same model, engine, hardware and arms; see the README) was measured on a newer engine
    version.

    \b
    Example:
      kbgen list records/
      kbgen list --stale
    """
    from kbgen.kb import loading as kb

    base = kb.load([root])
    if base.problems:
        raise InvalidInput(base.problems)
    if stale:
        _list_stale(base)
        return
    rows = [
        (r.id, str(r.status), str(r.verdict.outcome) if r.verdict else "-", r.title)
        for r in sorted(base.records.values(), key=lambda r: (r.created, r.id), reverse=True)
    ]
    header = ("ID", "STATUS", "VERDICT", "TITLE")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        cells = [cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)]
        click.echo("  ".join([*cells, row[3]]))
    for plan in sorted(base.plans.values(), key=lambda p: p.id):
        click.echo(f"plan {plan.id}: {plan.title} ({len(plan.tasks)} tasks)")


def _list_stale(base: KnowledgeBase) -> None:
    from kbgen.kb import replications
    from kbgen.kb.cards import Card

    stale = replications.evidence(Card.of(r) for r in base.records.values()).stale
    for record_id, old in sorted(stale.items()):
        path = base.path_of(base.records[record_id])
        click.echo(f"{record_id}  {old.said()}  ({path})")
    if not stale:
        click.echo("no stale records", err=True)


@cli.command()
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("docs/schema"),
    show_default=True,
    help="Folder to write record, plan and experiment .schema.json files into.",
)
def schema(out: Path) -> None:
    """Write the JSON Schema of records, plans and experiment specs, for editors and tools.

    Point the YAML language server at it (VS Code: the `yaml.schemas` setting, or a first
    line `# yaml-language-server: $schema=../docs/schema/record.schema.json` in a record).
    Files whose content is unchanged are left untouched.

    \b
    Example:
      kbgen schema --out docs/schema
    """
    from kbgen.bench.spec import ExperimentSpec
    from kbgen.kb.models import json_schemas

    schemas = {**json_schemas(), "experiment.schema": ExperimentSpec.model_json_schema()}
    for stem, body in schemas.items():
        path = out / f"{stem}.json"
        content = (json.dumps(body, indent=2, ensure_ascii=False) + "\n").encode()
        click.echo(
            f"wrote {path}" if files.write_if_changed(path, content) else f"unchanged {path}"
        )


@cli.command()
@click.argument("title")
@click.option(
    "--dir",
    "folder",
    type=click.Path(path_type=Path, file_okay=False),
    default=DEFAULT_RECORDS,
    show_default=True,
    help="Folder of the knowledge base's records.",
)
def new(title: str, folder: Path) -> None:
    """Start a planned record for TITLE, with a hypothesis to fill in.

    The id is today's date plus a slug of the title, so records opened on different
    branches do not collide.

    \b
    Example:
      kbgen new "EAGLE-3 draft vs baseline on Kimi-K2.5"
    """
    from kbgen.kb import scaffold

    click.echo(str(scaffold.new_record(title, folder)))


@cli.command()
@click.argument("spec_file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--resume",
    type=click.Path(path_type=Path, file_okay=False),
    help="Continue an interrupted run folder instead of starting a new one.",
)
@click.option(
    "--runs",
    "runs_root",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("runs"),
    show_default=True,
    help="Folder that receives the new run folder.",
)
def bench(spec_file: Path | None, resume: Path | None, runs_root: Path) -> None:
    """Run an experiment spec against a real LLM server and keep every raw sample.

    Starts (or reaches) the server once per variant, warms it up, streams every prompt of
    every class, scrapes /metrics around the measurement window, and writes everything to
    runs/<run-id>/. A killed or failed run keeps what it measured: continue it with --resume.
    Exit 5 when the server could not be started or died.

    No secret reaches the run folder: its copy of the spec has them masked, so a spec that is
    to be resumed takes them from the environment, written as ${NAME} (in a server's URL, and a
    process server's command, model, args and env).

    \b
    Example:
      kbgen bench bench/experiments/ngram-vs-baseline.yaml
      kbgen bench --resume runs/20261129T101500-ngram-vs-baseline
    """
    import asyncio

    from kbgen.bench import driver as bench_stage
    from kbgen.bench import progress, spec
    from kbgen.bench.runs import RunFolder

    if (spec_file is None) == (resume is None):
        raise UsageError("give either a SPEC_FILE or --resume RUN, not both or neither")
    if resume is not None:
        folder = RunFolder.open(resume)
        experiment = spec.load(folder.spec_path)
        attempts = folder.meta().attempts
        suite = bench_stage.check_inputs(experiment, folder.spec_path, folder)
        meta = folder.update_meta(status="running", attempts=attempts + 1)
    else:
        assert spec_file is not None
        if not spec_file.exists():  # a FIFO or folder is the spec loader's to name
            raise UsageError(f"{spec_file}: no such file")
        experiment = spec.load(spec_file)
        suite = bench_stage.check_inputs(experiment, spec_file)  # before any folder exists
        folder = RunFolder.create(
            runs_root,
            experiment.id,
            spec_file.read_text(),
            bench_stage.new_meta(experiment, spec_file),
        )
        meta = folder.meta()
    click.echo(f"run folder: {folder.path} (attempt {meta.attempts})", err=True)
    try:
        with progress.RichEvents() as events:
            totals = asyncio.run(bench_stage.run(experiment, folder, events, suite=suite))
    except KeyboardInterrupt:
        folder.update_meta(status="interrupted")
        click.echo(
            f"interrupted; samples kept. Continue with: kbgen bench --resume {folder.path}",
            err=True,
        )
        raise SystemExit(130) from None
    except KbgenError:
        folder.update_meta(status="failed")
        raise
    progress.show(progress.totals_table(totals))
    click.echo(str(folder.path))  # alone on stdout: `run=$(kbgen bench spec.yaml)` works


@cli.command()
@click.argument("targets", nargs=-1, required=True)
@click.option(
    "--from",
    "tool",
    type=click.Choice(["vllm-bench", "guidellm"]),
    help="TARGETS are VARIANT=FILE result files of this tool, the baseline first.",
)
@click.option(
    "--into",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="Fill in this planned record (made by `kbgen new`) instead of writing a new one.",
)
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="With --from: the spec the files ran (hypothesis, variants' settings, hardware, …).",
)
@click.option(
    "--prompts",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="With --from: the prompt file (JSONL of class and prompt) the tool sent; requests take "
    "their classes from it, matched by prompt text (GuideLLM) or by position (vllm bench serve "
    "--dataset-name custom --disable-shuffle).",
)
@click.option(
    "--records",
    type=click.Path(path_type=Path, file_okay=False),
    default=DEFAULT_RECORDS,
    show_default=True,
    help="Folder of the knowledge base's records.",
)
@click.option(
    "--allow-mismatch",
    is_flag=True,
    help="Compare variants measured on different engine versions, models or workloads; "
    "the record says so.",
)
@click.option(
    "--allow-summary-only",
    is_flag=True,
    help="With --from: decide from imported means when there are no per-request samples "
    "(no confidence interval; the record says so).",
)
@click.option(
    "--check",
    "check_only",
    is_flag=True,
    help="TARGETS are records: recompute their numbers from their samples, report differences.",
)
def record(
    targets: tuple[str, ...],
    tool: str | None,
    into: Path | None,
    spec_path: Path | None,
    prompts: Path | None,
    records: Path,
    allow_mismatch: bool,
    allow_summary_only: bool,
    check_only: bool,
) -> None:
    """Turn a bench run into a record with statistics and a verdict; import; or check.

    Summarises every metric per variant and prompt class (n, mean, median, p90, p99, stdev),
    adds the speculative-decoding figures, and decides the hypothesis with bootstrap
    confidence intervals. The compact samples are written beside the record so that
    `kbgen record --check` can recompute every number later, on any machine.

    \b
    Example:
      kbgen record runs/20261129T101500-ngram-vs-baseline
      kbgen record runs/20261129T101500-ngram-vs-baseline --into records/2026-11-29-ngram.yaml
      kbgen record --from vllm-bench baseline=base.json ngram=ngram.json --spec exp.yaml
      kbgen record --from vllm-bench baseline=b.json ngram=n.json --spec exp.yaml --prompts p.jsonl
      kbgen record --check records/2026-11-29-ngram-vs-baseline.yaml
    """
    from kbgen.record.command import record_import, record_run
    from kbgen.record.recompute import recompute

    if prompts is not None and tool is None:
        raise UsageError("--prompts goes with --from: a run folder and a record keep their classes")
    if check_only:
        problems = [p for target in targets for p in recompute(Path(target))]
        if problems:
            raise InvalidInput(problems)
        click.echo(f"ok: every number on {len(targets)} record(s) matches its samples")
        return
    if tool is not None:
        path = record_import(
            tool,
            list(targets),
            records,
            into,
            spec_path,
            allow_mismatch,
            allow_summary_only,
            prompts,
        )
    else:
        if len(targets) != 1:
            raise UsageError("give one run folder (or --from TOOL VARIANT=FILE ...)")
        run = Path(targets[0])
        if not run.is_dir():
            raise UsageError(f"{run}: no such run folder")
        path = record_run(run, records, into, allow_mismatch)
    click.echo(str(path))
    from kbgen.kb.documents import load_model
    from kbgen.kb.models import Record

    decided = load_model(path, Record).verdict
    for cls, c in (decided.per_class if decided else {}).items():
        interval = "" if c.ci_low is None else f" [{c.ci_low:+.1%}, {c.ci_high:+.1%}]"
        what = f"{c.unit or 'unit'}s"
        needs = f"; about {c.prompts_needed} {what} would decide it" if c.prompts_needed else ""
        # stderr: stdout stays the record's path alone, for scripts
        click.echo(f"{cls}: {c.outcome}, {c.effect:+.1%}{interval}{needs}", err=True)


KB_OPTION = click.option(
    "--records",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=DEFAULT_RECORDS,
    show_default=True,
    help="The knowledge base's folder.",
)
DOCS_OPTION = click.option(
    "--docs",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("docs"),
    show_default=True,
    help="The MkDocs docs folder; pages go to docs/records/ and docs/plans/.",
)
TEMPLATES_OPTION = click.option(
    "--templates",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="A folder of templates that override kbgen's (record.md.j2, plan.md.j2, index.md.j2).",
)


@cli.command()
@KB_OPTION
@DOCS_OPTION
@TEMPLATES_OPTION
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if docs/ is not current.")
def render(records: Path, docs: Path, templates: Path | None, check: bool) -> None:
    """Render records and plans into Markdown pages and SVG charts for the site.

    One page per record (ADR style), one per plan with its checklist ticked from the
    records, and an index. Only pages whose content changed are rewritten, so an unchanged
    knowledge base changes no byte; --check tells CI whether docs/ is stale.

    \b
    Example:
      kbgen render && mkdocs serve
      kbgen render --check
    """
    from kbgen.site import build

    changed = build.render_site(records, docs, templates, check=check)
    if check:
        if changed:
            raise InvalidInput(
                [Problem(docs / path, None, "", "stale: run `kbgen render`") for path in changed]
            )
        click.echo(f"ok: {docs} is current")
        return
    click.echo(f"{len(changed)} file(s) written" if changed else "nothing changed")


@cli.command(name="diff")
@click.argument("base", required=False)
@click.argument("head", required=False)
@KB_OPTION
@click.option(
    "--all", "all_rows", is_flag=True, help="Show every metric row, not only changed ones."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
    help="Markdown for a pull-request comment, or JSON for machines.",
)
@TEMPLATES_OPTION
def diff_command(
    base: str | None,
    head: str | None,
    records: Path,
    all_rows: bool,
    fmt: str,
    templates: Path | None,
) -> None:
    """What changed in the evidence between two git revisions, as a PR comment.

    BASE defaults to where this branch forked from the main branch (origin/HEAD, main or
    master), HEAD to the working tree. Shows new, changed and removed records, status and
    verdict changes, metric deltas with their 95% intervals (changed rows only, unless --all),
    plan tasks newly ticked or unticked, and warnings.

    \b
    Example:
      kbgen diff                          # this branch's change, uncommitted work included
      kbgen diff main HEAD --format json
    """
    from kbgen.review import revisions as review

    click.echo(review.output(records, base, head, all_rows, fmt, templates), nl=False)


@cli.command(name="check")
@KB_OPTION
@DOCS_OPTION
@TEMPLATES_OPTION
@click.option(
    "--main",
    "main_branch",
    help="The branch new record ids must not collide with (default: origin/HEAD, main or master).",
)
@click.option(
    "--every-record",
    is_flag=True,
    help="Recompute every record's numbers from its samples, not only the records this branch "
    "changed.",
)
@click.option(
    "--strict", is_flag=True, help="Refuse records that contradict each other, not only warn."
)
def check_command(
    records: Path,
    docs: Path,
    templates: Path | None,
    main_branch: str | None,
    every_record: bool,
    strict: bool,
) -> None:
    """Everything a reviewer's CI should refuse, one line per problem.

    Validates every record and plan, checks that docs/ is what `kbgen render` would write,
    and lints: record ids this branch adds that the main branch added too, Markdown links to
    pages that do not exist, measured records without their samples file, and numbers edited
    by hand so they no longer follow from the samples (recomputed for the records this branch
    changed since it forked from the main branch; --every-record for all). Records of one
    question that contradict each other (one supported, one refuted; or effect intervals that
    do not overlap) are warnings; --strict makes them errors.

    \b
    Example:
      kbgen check && kbgen diff > comment.md
      kbgen check --strict                # contradictions fail the check too
    """
    from kbgen.review import lint

    report = lint.verify(records, docs, templates, main_branch, every_record, strict)
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    for warning in report.warnings:
        click.echo(f"warning: {redact.text(str(warning))}", err=True)
    if report.problems:
        raise InvalidInput(report.problems)
    warned = f"; {len(report.warnings)} warning(s)" if report.warnings else ""
    click.echo(f"ok: records valid, docs current, no lint problems{warned}")


def main() -> None:
    try:
        cli(prog_name="kbgen")
    except Exception as exc:  # no KbgenError: a bug in kbgen; still one line, secrets masked
        for line in redact.text(f"{type(exc).__name__}: {exc}").splitlines():
            click.echo(f"error: internal error: {line}", err=True)
        raise SystemExit(1) from None
