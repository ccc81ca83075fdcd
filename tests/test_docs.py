"""The documentation that describes code is generated from it and current: the CLI reference
(complete, in the site's nav), the design page's parts that cog writes, and the README and
Guide: a short front door, every guide page in the nav, every relative link to a file there."""

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
SPEC_FIELDS = REPO / "docs" / "guide" / "spec.md"
GENERATED = [CLI_REFERENCE, DESIGN, REVIEW, SPEC_FIELDS]
REGENERATE = "cog -r " + " ".join(str(path.relative_to(REPO)) for path in GENERATED)


@pytest.mark.parametrize("path", GENERATED, ids=lambda path: path.name)
def test_the_generated_text_is_current(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file is what cog writes from today's code (`cog --check`, as CI would run it): the
    CLI reference from the real `--help`, the design page's layout and rules from the modules."""
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


GUIDE = REPO / "docs" / "guide"
FRONT = [README, REPO / "CONTRIBUTING.md"]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")  # a Markdown link's target, its anchor cut


def test_the_readme_is_a_front_door() -> None:
    """What it is, the two commands, `kbgen init`, the commands, and links: the rest is the
    Guide's."""
    assert README.read_text().count("\n") <= 150


def _nav_pages(items: list[object]) -> list[str]:
    pages: list[str] = []
    for item in items:
        for value in item.values() if isinstance(item, dict) else [item]:
            pages += _nav_pages(value) if isinstance(value, list) else [str(value)]
    return pages


def test_every_guide_page_is_in_the_nav() -> None:
    config = yaml_load((REPO / "mkdocs.yml").read_text())
    guide = next(item["Guide"] for item in config["nav"] if "Guide" in item)
    listed = _nav_pages(guide)
    assert sorted(listed) == sorted(
        p.relative_to(REPO / "docs").as_posix() for p in GUIDE.glob("*.md")
    )


@pytest.mark.parametrize("page", [*FRONT, *sorted(GUIDE.glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_reaches_a_file(page: Path) -> None:
    """The README's and CONTRIBUTING's links are read on GitHub, not checked by a site build."""
    targets = [
        t for t in LINK.findall(page.read_text()) if "://" not in t and not t.startswith("mailto:")
    ]
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert not missing
    assert targets or page not in FRONT  # the front door links to the rest


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


# --- module docstrings: what the design page's layout is generated from -------------------------

PACKAGE = REPO / "src" / "kbgen"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_every_module_says_in_its_first_line_what_it_is_for(path: Path) -> None:
    """The line the design page's layout shows: a sentence of its own, within the line length."""
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
