"""The `kbgen` group: errors shown and mapped to exit codes, and the options commands share.

Errors are shown and mapped to exit codes here and only here (`_Group`, `EXIT_CODES`): a
KbgenError, or a usage error click finds, prints its `lines`, secrets masked, never a traceback.
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
CHECK_CACHE = Path(".kbgen_cache") / "check.json"  # `kbgen check`'s (`lint.verify`)
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


KB_OPTION = records_option(must_exist=True)
DOCS_OPTION = click.option(
    "--docs",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    show_default="docs/ beside the records folder",
    help="The MkDocs docs folder; pages go to docs/records/ and docs/plans/.",
)


def docs_beside(records: Path, docs: Path | None) -> Path:
    """As given, else beside the knowledge base (the layout mkdocs.yml and the hook assume)."""
    return records.parent / "docs" if docs is None else docs


TEMPLATES_OPTION = click.option(
    "--templates",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    metavar="DIR",
    help="A folder of templates that override kbgen's (record.md.j2, plan.md.j2, index.md.j2).",
)
