"""The hand-written documentation: the CLI reference is current, complete and in the site's nav."""

from __future__ import annotations

import inspect
import re

import click
import pytest
from cogapp import Cog
from mkdocs.utils import yaml_load  # reads the !ENV tags of mkdocs.yml

from kbgen.cli import cli
from tests.conftest import REPO

CLI_REFERENCE = REPO / "docs" / "cli-reference.md"


def test_the_cli_reference_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    """The page is what cog writes from today's `--help` (`cog --check`, as CI would run it)."""
    status = Cog().main(["cog", "--check", "--diff", "--verbosity=0", str(CLI_REFERENCE)])
    assert status == 0, f"{capsys.readouterr().out}\nrun: cog -r docs/cli-reference.md"


def test_the_cli_reference_documents_every_command() -> None:
    headings = re.findall(r"^## (kbgen.*)$", CLI_REFERENCE.read_text(), re.M)
    assert headings == ["kbgen", *(f"kbgen {name}" for name in sorted(cli.commands))]


def test_the_cli_reference_is_in_the_nav() -> None:
    config = yaml_load((REPO / "mkdocs.yml").read_text())
    reference = next(item["Reference"] for item in config["nav"] if "Reference" in item)
    assert {"Command line": "cli-reference.md"} in reference


@pytest.mark.parametrize(
    "command", [cli, *cli.commands.values()], ids=["kbgen", *cli.commands.keys()]
)
def test_every_docstring_ends_with_an_example(command: click.Command) -> None:
    """A command's docstring is its --help; its last paragraph shows how to run it."""
    assert command.help is not None
    last = inspect.cleandoc(command.help).split("\n\n")[-1]
    assert re.fullmatch(r"\x08\nExample:\n(  kbgen\b.*\n?)+", last), last
