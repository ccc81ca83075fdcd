"""`kbgen init`: the kit written where nothing is, never over a user's file, the same again on a
second run; the kit's site the same as the example's where pages depend on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mkdocs.utils.yaml import yaml_load  # reads the !ENV tags of mkdocs.yml

from kbgen import __version__
from kbgen.cli import cli
from kbgen.site import starter
from tests.conftest import REPO


def _mkdocs(text: str) -> dict[str, Any]:
    """mkdocs.yml read as MkDocs reads it (its `!ENV` tags)."""
    site: dict[str, Any] = yaml_load(text)
    return site


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def test_init_writes_the_kit_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    first = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert first.exit_code == 0, first.output
    wanted = {*starter.FILES.values(), *starter.schemas()}
    assert wanted <= set(_tree(tmp_path))
    assert (tmp_path / "docs" / "plans" / "first-plan.md").exists()  # rendered at once
    assert "rendered" in first.output and "kept" not in first.output
    before = _tree(tmp_path)
    again = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert again.exit_code == 0, again.output
    assert "wrote" not in again.output and "added" not in again.output
    assert again.output.count("(already there)") == len(wanted)
    assert _tree(tmp_path) == before


def test_init_never_replaces_a_user_s_file(tmp_path: Path) -> None:
    (tmp_path / "mkdocs.yml").write_text("site_name: theirs\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "elsewhere.md").write_text("# theirs\n")
    (tmp_path / "docs" / "index.md").symlink_to(tmp_path / "docs" / "elsewhere.md")
    started = starter.init(tmp_path)
    assert {"mkdocs.yml", "docs/index.md"} <= set(started.kept)
    assert (tmp_path / "mkdocs.yml").read_text() == "site_name: theirs\n"
    assert (tmp_path / "docs" / "index.md").is_symlink()
    assert (tmp_path / "docs" / "elsewhere.md").read_text() == "# theirs\n"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("", None),
        ("*.pyc", "*.pyc\n"),  # no newline at its end: the additions start on a line of their own
        ("/site/\n", "/site/\n"),  # one line there already: only the other added
        (".kbgen_cache/\n/site/\n/runs/\n", ".kbgen_cache/\n/site/\n/runs/\n"),
    ],
)
def test_init_adds_only_the_ignore_lines_missing(
    tmp_path: Path, before: str, after: str | None
) -> None:
    if before:
        (tmp_path / ".gitignore").write_text(before)
    added = starter.init(tmp_path).ignored
    text = (tmp_path / ".gitignore").read_text()
    lines = text.splitlines()
    ignored = (".kbgen_cache/", "/site/", "/runs/")  # caches, the built site, run folders
    assert sorted(line for line in lines if line in ignored) == sorted(ignored)
    assert added == [line for line in ignored if line not in before]
    if after is not None:
        assert text.startswith(after)
        assert text == after if not added else text.count("\n") == len(lines)


def test_the_workflows_install_the_kbgen_that_ran_init_and_the_name_is_yaml_safe() -> None:
    made = starter.contents('a "quoted" \\ name: here', version="9.8.7")
    assert 'pip install "kbgen==9.8.7"' in made[".github/workflows/kbgen-review.yml"]
    assert 'pip install "kbgen[site]==9.8.7"' in made[".github/workflows/kbgen-pages.yml"]
    assert [rel for rel, text in made.items() if "@KBGEN_" in text or "@SITE_NAME@" in text] == []
    site = _mkdocs(made["mkdocs.yml"])
    assert site["site_name"] == 'a "quoted" \\ name: here'
    assert starter.contents("x")[".pre-commit-config.yaml"].count(f"kbgen[site]=={__version__}")


def test_the_kit_s_site_is_the_example_s_where_kbgen_s_pages_depend_on_it() -> None:
    """Every extension, plugin, theme feature and script the example site builds with is in the
    site `init` writes (one missing shows its markup as text), and the shared files are the
    same."""
    example, kit = (
        _mkdocs((REPO / "mkdocs.yml").read_text()),
        _mkdocs(starter.kit("mkdocs.yml")),
    )
    for key in (
        "markdown_extensions",
        "plugins",
        "theme",
        "extra_javascript",
        "extra_css",
        "hooks",
        "watch",
    ):
        assert kit[key] == example[key], key
    for shared in ("docs/tags.md", "docs/hooks/kbgen_render.py"):
        assert starter.kit(shared) == (REPO / shared).read_text(), shared


def test_the_plan_init_writes_is_valid_and_its_pages_render(tmp_path: Path) -> None:
    starter.init(tmp_path)
    done = CliRunner().invoke(cli, ["validate", str(tmp_path / "records")])
    assert done.exit_code == 0, done.output


def test_the_pre_commit_configuration_runs_kbgen(tmp_path: Path) -> None:
    """`pre-commit run` in a repository `init` started: both hooks pass, and a record edited
    without rendering is rendered by the first and the commit stopped (the pages changed)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, cwd=tmp_path / "repo", env=env, capture_output=True, text=True, timeout=300
        )

    repo = tmp_path / "repo"
    repo.mkdir()
    run("git", "init", "-q", "-b", "main")
    started = CliRunner().invoke(cli, ["init", str(repo)])  # it renders the pages too
    assert started.exit_code == 0, started.output
    run("git", "add", "-A")
    pre_commit = str(Path(sys.executable).with_name("pre-commit"))
    clean = run(pre_commit, "run", "--all-files")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.count("Passed") == 2
    plan = repo / "records" / "plans" / "first-plan.yaml"
    plan.write_text(plan.read_text().replace("First steps:", "First steps, renamed:"))
    run("git", "add", "-A")
    edited = run(pre_commit, "run", "--all-files")
    assert edited.returncode == 1 and "files were modified by this hook" in edited.stdout
    assert "First steps, renamed" in (repo / "docs" / "plans" / "first-plan.md").read_text()


def test_init_renders_nothing_over_a_user_s_page_where_kbgen_writes_its_own(
    tmp_path: Path,
) -> None:
    (tmp_path / "docs" / "records").mkdir(parents=True)
    theirs = tmp_path / "docs" / "records" / "index.md"
    theirs.write_text("# Our own list of records\n")
    started = starter.init(tmp_path)
    assert started.foreign == ["records/index.md"] and started.rendered == []
    assert theirs.read_text() == "# Our own list of records\n"
    assert not (tmp_path / "docs" / "plans").exists()
    said = started.said(tmp_path)
    assert f"not rendered: {theirs} is not a page kbgen wrote" in "\n".join(said)
    assert not [line for line in said if line.startswith("rendered")]
    theirs.unlink()
    assert starter.init(tmp_path).rendered  # moved away: the pages are rendered
