"""The documentation that describes code is generated from it and current: the CLI reference
(complete, in the site's nav) and the README's parts that cog writes."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from pathlib import Path

import click
import pytest
from cogapp import Cog
from mkdocs.utils.yaml import yaml_load  # reads the !ENV tags of mkdocs.yml

from kbgen.cli import cli
from tests.conftest import REPO

CLI_REFERENCE = REPO / "docs" / "cli-reference.md"
DESIGN = REPO / "docs" / "design.md"
README = REPO / "README.md"
# every file with cog blocks; `cog -r` them all to regenerate
REVIEW = REPO / "docs" / "review.md"
GENERATED = [CLI_REFERENCE, DESIGN, README, REVIEW]
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


@pytest.mark.parametrize(
    "entry", [{"Command line": "cli-reference.md"}, {"How kbgen is built": "design.md"}]
)
def test_the_reference_pages_are_in_the_nav(entry: dict[str, str]) -> None:
    config = yaml_load((REPO / "mkdocs.yml").read_text())
    reference = next(item["Reference"] for item in config["nav"] if "Reference" in item)
    assert entry in reference


def test_every_module_the_design_page_names_exists() -> None:
    named = set(re.findall(r"`(kbgen(?:\.\w+)+)", DESIGN.read_text()))
    assert len(named) > 20
    assert [name for name in sorted(named) if importlib.util.find_spec(name) is None] == []


@pytest.mark.parametrize(
    "command", [cli, *cli.commands.values()], ids=["kbgen", *cli.commands.keys()]
)
def test_every_docstring_ends_with_an_example(command: click.Command) -> None:
    """A command's docstring is its --help; its last paragraph shows how to run it."""
    assert command.help is not None
    last = inspect.cleandoc(command.help).split("\n\n")[-1]
    assert re.fullmatch(r"\x08\nExample:\n(  kbgen\b.*\n?)+", last), last


# --- module docstrings: what the README's layout is generated from ------------------------------

PACKAGE = REPO / "src" / "kbgen"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_every_module_says_in_its_first_line_what_it_is_for(path: Path) -> None:
    """The line the README's layout shows: a sentence of its own, within the line length."""
    summary, _, rest = _docstring(path).partition("\n")
    assert summary.endswith("."), f"{_name(path)}: no one-line summary: {summary!r}"
    assert len(f'"""{summary}') <= 100 and (not rest or rest.startswith("\n")), summary


def test_module_docstrings_are_a_few_lines() -> None:
    """A summary and at most one short paragraph; the reasons belong in docs/design.md."""
    long = [
        _name(path)
        for path in MODULES
        if len((doc := _docstring(path)).splitlines()) > 6 or len(doc.split("\n\n")) > 2
    ]
    assert long == [], f"too long (the reasons go to docs/design.md): {long}"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_the_design_page_has_the_section_a_docstring_names(path: Path) -> None:
    headings = set(re.findall(r"^#+ (.+)$", DESIGN.read_text(), re.M))
    named = re.findall(r'docs/design\.md,\s+"([^"]+)"', _docstring(path))
    assert [n for n in (" ".join(n.split()) for n in named) if n not in headings] == []


def test_no_history_in_the_code() -> None:
    """Comments say why, not what changed: history belongs in git (STYLE.md)."""
    said = [_name(p) for p in MODULES if "as before" in p.read_text(encoding="utf-8")]
    assert said == []
