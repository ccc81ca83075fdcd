"""The documentation that describes code is generated from it and current: the CLI reference
(complete, in the site's nav) and the README's parts that cog writes."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import click
import pytest
from cogapp import Cog
from mkdocs.utils import yaml_load  # reads the !ENV tags of mkdocs.yml

from kbgen.cli import cli
from tests.conftest import REPO

CLI_REFERENCE = REPO / "docs" / "cli-reference.md"
README = REPO / "README.md"
GENERATED = [CLI_REFERENCE, README]  # every file with cog blocks: `cog -r` them all to regenerate
REGENERATE = "cog -r " + " ".join(str(path.relative_to(REPO)) for path in GENERATED)


@pytest.mark.parametrize("path", GENERATED, ids=lambda path: path.name)
def test_the_generated_text_is_current(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file is what cog writes from today's code (`cog --check`, as CI would run it): the
    CLI reference from the real `--help`, the README's layout and rules from the modules."""
    status = Cog().main(["cog", "--check", "--diff", "--verbosity=0", str(path)])
    assert status == 0, f"{capsys.readouterr().out}\nrun: {REGENERATE}"


def test_every_file_with_cog_blocks_is_checked() -> None:
    found = {
        path
        for path in [*REPO.glob("*.md"), *(REPO / "docs").rglob("*.md")]
        if "[[[cog" in path.read_text()
    }
    assert found == set(GENERATED)


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
