"""The `kbgen` command line: parse, make one library call, print.

The group and its error handling are `group`; the commands, by what they act on, `knowledge`,
`experiments` and `pages`. Each command imports its stage when it runs, so a command pays only
for what it uses.
"""

from __future__ import annotations

import click

from kbgen import redact
from kbgen.cli import experiments, knowledge, pages  # noqa: F401 -- their commands join `cli`
from kbgen.cli.group import EXIT_CODES, cli, exit_code

__all__ = ["EXIT_CODES", "cli", "exit_code", "main"]


def main() -> None:
    try:
        cli(prog_name="kbgen")
    except Exception as exc:  # no errors.KbgenError: a bug in kbgen; still one line, secrets masked
        for line in redact.text(f"{type(exc).__name__}: {exc}").splitlines():
            click.echo(f"error: internal error: {line}", err=True)
        raise SystemExit(1) from None
