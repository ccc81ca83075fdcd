"""`kbgen render`, `diff` and `check`: the pages, and a change's review."""

from __future__ import annotations

from pathlib import Path

import click

from kbgen import errors, redact
from kbgen.cli.group import (
    CHECK_CACHE,
    DOCS_OPTION,
    KB_OPTION,
    TEMPLATES_OPTION,
    cli,
    docs_beside,
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

    docs = docs_beside(records, docs)
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
@click.option(
    "--cache/--no-cache",
    default=True,
    show_default=True,
    help=f"Parse only the files changed since the last check ({CHECK_CACHE}).",
)
def check_command(
    records: Path,
    docs: Path | None,
    templates: Path | None,
    main_branch: str | None,
    every_record: bool,
    strict: bool,
    cache: bool,
) -> None:
    """Everything a reviewer's CI should refuse, one line per problem.

    Validates every record and plan, checks that docs/ is what `kbgen render` would write,
    and lints: record ids this branch adds that the main branch added too, Markdown links to
    pages that do not exist, measured records without their samples file, and numbers edited
    by hand so they no longer follow from the samples (recomputed for the records whose
    numbers or samples this branch changed since it forked from the main branch, not for an
    edit of their words alone; --every-record for all). Records of one
    question that contradict each other (one supported, one refuted; or effect intervals that
    do not overlap) are warnings; --strict makes them errors.

    \b
    Example:
      kbgen check && kbgen diff > comment.md
      kbgen check --strict                # contradictions fail the check too
    """
    from kbgen.review import lint

    report = lint.verify(
        records,
        docs_beside(records, docs),
        templates,
        main_branch,
        every_record,
        strict,
        CHECK_CACHE if cache else None,
    )
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    for warning in report.warnings:
        click.echo(f"warning: {redact.text(str(warning))}", err=True)
    if report.problems:
        raise errors.InvalidInput(report.problems)
    warned = f"; {len(report.warnings)} warning(s)" if report.warnings else ""
    click.echo(f"ok: records valid, docs current, no lint problems{warned}")
