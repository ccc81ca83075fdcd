"""The `kbgen` command line: parse, make one library call, print.

Errors are shown and mapped to exit codes here and only here (`_Group`, `EXIT_CODES`): a
KbgenError, or a usage error click finds, prints its `lines`, secrets masked, never a traceback.
Each command imports its stage when it runs, so a command pays only for what it uses.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from kbgen import __version__, errors, redact
from kbgen.kb import files

# Checked in order: the first class that matches decides; the CLI reference has the table
EXIT_CODES: list[tuple[type[errors.KbgenError], int, str]] = [
    (errors.InvalidInput, 1, "an input file is invalid: fix the FILE:LINE named"),
    (errors.UsageError, 2, "the command line is wrong: an unknown option, a missing argument, ..."),
    (errors.Conflict, 3, "someone else changed the file while kbgen worked: re-run"),
    (errors.StoreError, 4, "the disk refused a read or a write"),
    (errors.ServerError, 5, "the LLM server could not be started or reached, or died"),
    (errors.TemplateError, 1, "a template is wrong or refused: fix the FILE:LINE named"),
    (errors.KbgenError, 1, "anything else kbgen refuses, said in the message"),
]


def exit_code(exc: errors.KbgenError) -> int:
    return next(code for cls, code, _ in EXIT_CODES if isinstance(exc, cls))


_NO_ARGS_IS_HELP: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click 8.2 on


class _Group(click.Group):
    """The one place errors are shown: click's usage errors as kbgen's errors.UsageError."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:  # `kbgen --bogus`
            if isinstance(exc, _NO_ARGS_IS_HELP):
                raise
            raise click.exceptions.Exit(_report(errors.UsageError(exc.format_message()))) from None

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # an unknown command, a command's arguments or options
            ctx.exit(_report(errors.UsageError(exc.format_message())))
        except errors.KbgenError as exc:
            ctx.exit(_report(exc))


def _report(exc: errors.KbgenError) -> int:
    """Show `exc` on stderr as its kind is shown, secrets masked; its exit code."""
    for line in exc.lines(redact.text):
        click.echo(line, err=True)
    return exit_code(exc)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kbgen")
def cli() -> None:
    """kbgen: inference experiments in, a decision-record knowledge base out.

    \b
    Example:
      kbgen new "n-gram speculative decoding on SmolLM2"
      kbgen validate
    """


CACHE = Path(".kbgen_cache") / "validate.json"
F = TypeVar("F", bound=Callable[..., Any])


def records_option(*, must_exist: bool) -> Callable[[F], F]:
    """`--records DIR`, the knowledge base's folder in every command that reads or writes it;
    by default `files.find_records`. A reader (`must_exist`) refuses one that does not exist."""

    def found(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path:
        if value is not None:
            return value  # click has checked it
        records = files.find_records()
        return files.existing_records(records) if must_exist else records

    return click.option(
        "--records",
        type=click.Path(path_type=Path, file_okay=False, exists=must_exist),
        metavar="DIR",
        callback=found,
        show_default="the nearest records/ of YAML, from here up to the repository's top",
        help="The knowledge base's folder: records, and plans in its plans/.",
    )


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@records_option(must_exist=False)
@click.option(
    "--cache/--no-cache",
    default=True,
    show_default=True,
    help=f"Skip files that were valid and are unchanged since the last run ({CACHE}).",
)
def validate(paths: tuple[Path, ...], records: Path, cache: bool) -> None:
    """Validate records and plans; report every problem as FILE:LINE: FIELD: MESSAGE.

    PATHS (by default the knowledge base) are checked against the schema, then the references
    they make: plan tasks a record resolves, records it supersedes or relates to, duplicate
    ids. Exit 0 when clean, 1 when anything is invalid, 2 on a usage error.

    \b
    Example:
      kbgen validate                      # everything under records/
      kbgen validate records/2026-11-29-ngram.yaml
    """
    from kbgen.kb.validation import validate as validated

    cached = CACHE if cache else None
    kinds = validated(list(paths) or [files.existing_records(records)], records, cached)
    click.echo(f"ok: {kinds['record']} record(s) and {kinds['plan']} plan(s) valid")


@cli.command(name="list")
@records_option(must_exist=True)
@click.option(
    "--stale",
    is_flag=True,
    help="Only the records measured on an older engine version than a comparable record.",
)
def list_records(records: Path, stale: bool) -> None:
    """List records with status, verdict and title, newest first.

    With --stale, name the records whose evidence is stale: a record of the same question
    (same model, engine, hardware and arms; see the design page) was measured on a newer engine
    version.

    \b
    Example:
      kbgen list
      kbgen list --stale --records ../other-kb/records
    """
    from kbgen.kb import listing
    from kbgen.kb import loading as kb

    base = kb.load([records])
    if base.problems:
        raise errors.InvalidInput(base.problems)
    lines = listing.stale(base) if stale else listing.table(base)
    if lines:
        click.echo("\n".join(lines))
    elif stale:
        click.echo("no stale records", err=True)


@cli.command()
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
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
    from kbgen.site.starter import schemas

    for rel, text in schemas().items():
        written = files.write_if_changed(out / Path(rel).name, text.encode())
        click.echo(f"{'wrote' if written else 'unchanged'} {out / Path(rel).name}")


@cli.command()
@click.argument(
    "directory", default=".", type=click.Path(path_type=Path, file_okay=False), required=False
)
@click.option("--name", help="The site's name (default: DIRECTORY's name + 'knowledge base').")
def init(directory: Path, name: str | None) -> None:
    """Start a knowledge base in DIRECTORY (default: here), a git repository's root.

    Writes records/ with a first plan, the site (mkdocs.yml, docs/), the review and Pages
    workflows (installing this kbgen) and a pre-commit configuration; completes .gitignore;
    renders the pages. A file already there is kept: run it again to add what is missing.

    \b
    Example:
      kbgen init && mkdocs serve
    """
    from kbgen.site.starter import init as start

    click.echo("\n".join(start(directory, name).said(directory)))


@cli.command()
@click.argument("title")
@click.option(
    "--id",
    "doc_id",
    metavar="ID",
    help="The new file's id (its name without .yaml); refused if taken. Default: a record's is "
    "today's date and a slug of TITLE, a plan's the slug.",
)
@click.option(
    "--plan",
    is_flag=True,
    help="Start a plan (plans/ID.yaml) with a task to fill in, not a record.",
)
@records_option(must_exist=False)
def new(title: str, doc_id: str | None, plan: bool, records: Path) -> None:
    """Start a planned record for TITLE, with a hypothesis to fill in; or, with --plan, a plan.

    A record's id is by default today's date plus a slug of the title, so records opened on
    different branches do not collide; a plan's is the slug alone, as records name its tasks
    by it. An existing file is never overwritten. Prints the new file's path.

    \b
    Example:
      kbgen new "EAGLE-3 draft vs baseline on Kimi-K2.5"
      kbgen new "EAGLE-3 on Kimi-K2.5" --id 2026-12-02-eagle3-kimi
      kbgen new --plan "Next steps: an EAGLE-3 draft" --id next-steps-eagle
    """
    from kbgen.kb import scaffold

    if plan:
        path = scaffold.new_plan(title, records, doc_id)
    else:
        path = scaffold.new_record(title, records, record_id=doc_id)
    click.echo(str(path))


@cli.command()
@click.argument("spec_file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--resume",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="RUN",
    help="Continue an interrupted run folder instead of starting a new one.",
)
@click.option(
    "--runs",
    "runs_root",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    default=Path("runs"),
    show_default=True,
    help="Folder that receives the new run folder.",
)
@click.option(
    "--estimate",
    is_flag=True,
    help="Start nothing: print the design's cost and the prompts it needs, from --records.",
)
@click.option(
    "--ray",
    metavar="ADDRESS",
    help="Run the spec's blocks on a Ray cluster (kbgen[ray]): local (start one here), auto, "
    "ray://HOST:PORT.",
)
@records_option(must_exist=False)
def bench(
    spec_file: Path | None,
    resume: Path | None,
    runs_root: Path,
    estimate: bool,
    ray: str | None,
    records: Path,
) -> None:
    """Run an experiment spec against a real LLM server and keep every raw sample.

    Starts (or reaches) the server once per variant, warms it up, streams every prompt of
    every class, scrapes /metrics around the measurement window, and writes everything to
    runs/<run-id>/. A killed or failed run keeps what it measured: continue it with --resume.
    Exit 5 when the server could not be started or died. With --ray, each of the spec's
    `cluster.blocks` runs every arm on a node of its own; its node lost, it runs again elsewhere.

    No secret reaches the run folder: its copy of the spec has them masked, so a spec that is
    to be resumed takes them from the environment, written as ${NAME} (in a server's URL, and a
    process server's command, model, args and env).

    \b
    Example:
      kbgen bench bench/experiments/ngram-vs-baseline.yaml
      kbgen bench --resume runs/20261129T101500-ngram-vs-baseline
      kbgen bench bench/experiments/ngram-vs-baseline.yaml --estimate
      kbgen bench bench/experiments/ngram-vs-baseline.yaml --ray local
    """
    from kbgen.bench import command as bench_stage
    from kbgen.bench import progress
    from kbgen.record import command, stopping

    if estimate:
        click.echo("\n".join(command.estimate_spec(spec_file, resume, records)))
        return
    run = bench_stage.prepare(spec_file, resume, runs_root, ray)
    folder = run.folder
    click.echo(f"run folder: {folder.path} (attempt {run.meta.attempts})", err=True)
    try:
        look = stopping.looker(run.experiment, folder)
        totals = bench_stage.execute(run, ray, look, lambda line: click.echo(line, err=True))
    except KeyboardInterrupt:
        again = f"kbgen bench --resume {folder.path}" + (f" --ray {ray}" if ray else "")
        click.echo(f"interrupted; samples kept. Continue with: {again}", err=True)
        raise SystemExit(130) from None
    for each in totals:
        progress.show(progress.totals_table(each))
    click.echo(str(folder.path))  # alone on stdout: `run=$(kbgen bench spec.yaml)` works


@cli.command()
@click.argument("targets", nargs=-1, required=True)
@click.option(
    "--from",
    "tool",
    type=click.Choice(["vllm-bench", "guidellm", "vllm-bench-sweep"]),
    help="TARGETS are VARIANT=FILE result files of this tool, the baseline first; "
    "vllm-bench-sweep: one FOLDER, the experiment folder of `vllm bench sweep serve`.",
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
@records_option(must_exist=False)
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
    "--accept-time-confound",
    is_flag=True,
    help="With --from: decide from one run per arm, the arms confounded with any drift of the "
    "server (as a spec's workload.accept_time_confound; the record says so).",
)
@click.option(
    "--check",
    "check_only",
    is_flag=True,
    help="TARGETS are records: recompute their numbers from their samples, report differences.",
)
@click.option("--update", is_flag=True, help="--check, and rewrite what differs (new rules).")
def record(
    targets: tuple[str, ...],
    tool: str | None,
    into: Path | None,
    spec_path: Path | None,
    prompts: Path | None,
    records: Path,
    allow_mismatch: bool,
    allow_summary_only: bool,
    accept_time_confound: bool,
    check_only: bool,
    update: bool,
) -> None:
    """Turn a bench run into a record with statistics and a verdict; import; or check.

    Summarises every metric per variant and prompt class (n, mean, median, p90, p99, stdev),
    adds the speculative-decoding figures, and decides the hypothesis with Student-t intervals
    over prompts, the error controlled over the whole record. The compact samples are written
    beside the record so that `kbgen record --check` can recompute every number later.

    \b
    Example:
      kbgen record runs/20261129T101500-ngram-vs-baseline
      kbgen record runs/20261129T101500-ngram-vs-baseline --into records/2026-11-29-ngram.yaml
      kbgen record --from vllm-bench baseline=base.json ngram=ngram.json --spec exp.yaml
      kbgen record --from vllm-bench baseline=b.json ngram=n.json --spec exp.yaml --prompts p.jsonl
      kbgen record --from vllm-bench-sweep results/tiny-sweep --spec exp.yaml
      kbgen record --check records/2026-11-29-ngram-vs-baseline.yaml
      kbgen record --check --update records/*.yaml
    """
    from kbgen.record.command import check, record_import, record_run, summary

    if (prompts is not None or accept_time_confound) and tool is None:
        raise errors.UsageError("--prompts and --accept-time-confound go with --from")
    if check_only or update:
        for line in check([Path(t) for t in targets], update):
            click.echo(line)
        return
    if tool is not None:
        allow = (allow_mismatch, allow_summary_only, accept_time_confound)
        path = record_import(tool, [*targets], records, into, spec_path, *allow, prompts=prompts)
    else:
        if len(targets) != 1:
            raise errors.UsageError("give one run folder (or --from TOOL VARIANT=FILE ...)")
        run = Path(targets[0])
        if not run.is_dir():
            raise errors.UsageError(f"{run}: no such run folder")
        path = record_run(run, records, into, allow_mismatch)
    click.echo(str(path))
    for line in summary(path):  # stderr: stdout stays the record's path alone, for scripts
        click.echo(line, err=True)


KB_OPTION = records_option(must_exist=True)
DOCS_OPTION = click.option(
    "--docs",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    show_default="docs/ beside the records folder",
    help="The MkDocs docs folder; pages go to docs/records/ and docs/plans/.",
)


def _docs_beside(records: Path, docs: Path | None) -> Path:
    """As given, else beside the knowledge base (the layout mkdocs.yml and the hook assume)."""
    return records.parent / "docs" if docs is None else docs


TEMPLATES_OPTION = click.option(
    "--templates",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    metavar="DIR",
    help="A folder of templates that override kbgen's (record.md.j2, plan.md.j2, index.md.j2).",
)


@cli.command()
@KB_OPTION
@DOCS_OPTION
@TEMPLATES_OPTION
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if docs/ is not current.")
def render(records: Path, docs: Path | None, templates: Path | None, check: bool) -> None:
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

    docs = _docs_beside(records, docs)
    changed = build.render_site(records, docs, templates, check=check)
    if check:
        if changed:
            raise errors.InvalidInput(
                [
                    errors.Problem(docs / path, None, "", "stale: run `kbgen render`")
                    for path in changed
                ]
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
    verdict changes, what each verdict rests on and its caveats, changed values old → new,
    metric deltas with 95% intervals (changed rows only, unless --all), tasks (un)ticked and
    warnings. An invalid HEAD prints a comment saying what is invalid, and exits 1.

    \b
    Example:
      kbgen diff                          # this branch's change, uncommitted work included
      kbgen diff main HEAD --format json
    """
    from kbgen.review import revisions as review

    try:
        click.echo(review.output(records, base, head, all_rows, fmt, templates), nl=False)
    except errors.InvalidHead as exc:  # the comment says what is invalid; then the error
        click.echo(exc.comment, nl=False)
        raise


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
    docs: Path | None,
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

    report = lint.verify(
        records, _docs_beside(records, docs), templates, main_branch, every_record, strict
    )
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    for warning in report.warnings:
        click.echo(f"warning: {redact.text(str(warning))}", err=True)
    if report.problems:
        raise errors.InvalidInput(report.problems)
    warned = f"; {len(report.warnings)} warning(s)" if report.warnings else ""
    click.echo(f"ok: records valid, docs current, no lint problems{warned}")


def main() -> None:
    try:
        cli(prog_name="kbgen")
    except Exception as exc:  # no errors.KbgenError: a bug in kbgen; still one line, secrets masked
        for line in redact.text(f"{type(exc).__name__}: {exc}").splitlines():
            click.echo(f"error: internal error: {line}", err=True)
        raise SystemExit(1) from None
