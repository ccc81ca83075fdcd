"""`kbgen validate`, `list`, `schema`, `init` and `new`: the knowledge base's own commands."""

from __future__ import annotations

from pathlib import Path

import click

from kbgen import errors
from kbgen.cli.group import (
    CACHE,
    cli,
    records_option,
)
from kbgen.kb import files


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
    "today's date and a slug of TITLE, a plan's and a spec's the slug.",
)
@click.option(
    "--plan",
    "kind",
    flag_value="plan",
    help="Start a plan (plans/ID.yaml) with a task to fill in, not a record.",
)
@click.option(
    "--spec",
    "kind",
    flag_value="spec",
    help="Start an experiment spec (experiments/ID.yaml beside the records folder) for "
    "`kbgen bench`, commented, not a record.",
)
@records_option(must_exist=False)
def new(title: str, doc_id: str | None, kind: str | None, records: Path) -> None:
    """Start a planned record for TITLE, with a hypothesis to fill in; or a plan, or a spec.

    A record's id is by default today's date plus a slug of the title, so records opened on
    different branches do not collide; a plan's is the slug alone, as records name its tasks
    by it, and so is a spec's. An existing file is never overwritten. Prints the new file's
    path.

    \b
    Example:
      kbgen new "EAGLE-3 draft vs baseline on Kimi-K2.5"
      kbgen new "EAGLE-3 on Kimi-K2.5" --id 2026-12-02-eagle3-kimi
      kbgen new --plan "Next steps: an EAGLE-3 draft" --id next-steps-eagle
      kbgen new --spec "n-gram vs baseline on Qwen3-8B"
    """
    from kbgen.bench.new_spec import new_spec
    from kbgen.kb import scaffold

    if kind == "plan":
        path = scaffold.new_plan(title, records, doc_id)
    elif kind == "spec":
        path = new_spec(title, records, doc_id)
    else:
        path = scaffold.new_record(title, records, record_id=doc_id)
    click.echo(str(path))
