"""`--templates DIR` is untrusted (it may come from a pull request's branch): its templates run in
Jinja's sandbox, read nothing outside their folder, and every error in them is one located line."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.errors import TemplateError
from kbgen.site import render
from tests.support.git import commit, git

SECRET = "kbgen-test-secret-file-content"

# a template trying to run code or change what it is given: the sandbox refuses the access
ESCAPES = {
    "class walk": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "cycler globals": "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "lipsum globals": "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "joiner globals": "{{ joiner.__init__.__globals__ }}",
    "namespace globals": "{{ namespace.__init__.__globals__ }}",
    "template context": "{{ self._TemplateReference__context }}",
    "model internals": "{{ record.__class__.__init__.__globals__ }}",
    "pydantic validator": "{{ record.__pydantic_validator__ }}",
    "format string": "{{ '{0.__class__.__init__.__globals__}'.format(record) }}",
    "mutating data": "{{ record.tags.append('x') }}",
    "mutating tasks": "{{ tasks.clear() }}",
}
# a template trying to exhaust the machine: refused before anything is allocated
BOMBS = {
    "range": "{{ range(10**10) | list }}",
    "power": "{{ 10 ** (10 ** 10) }}",
    "string": "{{ 'x' * 10**10 }}",
    "list": "{{ [1] * 10**10 }}",
    "width": "{{ 'x'.center(10**10) }}",
    "filter width": "{{ 'x' | center(10**10) }}",
    "indent": "{{ 'a' | indent(10**10, first=True) }}",
    "markdown indent": "{{ ('a\\n' * 1000) | markdown(indent=10**5) }}",
    "format width": "{{ '{:>9999999999}'.format(1) }}",
    "percent width": "{{ '%9999999999d' % 1 }}",
    "format filter": "{{ '%9999999999d' | format(1) }}",
    "json indent": "{{ record.model_dump_json(indent=10**9) }}",
}
REFUSED = {
    **{k: "is unsafe" for k in ESCAPES},
    **{k: "too (large|big)|more than|a million" for k in BOMBS},
}

# a template that is simply wrong: (its text, what the one line must say)
MISTAKES = {
    "syntax": ("line one\n{% if %}\n", r"record\.md\.j2:2: Expected an expression"),
    "undefined": (
        "a\nb\n{{ no_such_thing.x }}\n",
        r"record\.md\.j2:3: 'no_such_thing' is undefined",
    ),
    "exception": ("{{ 1 // 0 }}\n", r"record\.md\.j2:1: ZeroDivisionError"),
    "missing include": (
        '{% include "nope.j2" %}\n',
        r"record\.md\.j2:1: template 'nope.j2' not found",
    ),
}


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


def _render(kb_dir: Path, templates: Path) -> tuple[int, str, str]:
    docs = kb_dir.parent / "docs"
    args = ["render", "--records", str(kb_dir), "--docs", str(docs), "--templates", str(templates)]
    result = CliRunner().invoke(cli, args)
    pages = "".join(p.read_text() for p in docs.rglob("*.md")) if docs.exists() else ""
    return result.exit_code, result.stderr, pages


def _one_line_error(code: int, stderr: str) -> str:
    assert code == 1, stderr
    assert "Traceback" not in stderr and len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith("error: ")
    return stderr


def _templates(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / "templates"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("__", ".")).write_text(text)
    return folder


@pytest.mark.parametrize("attempt", REFUSED)
def test_a_template_cannot_run_code_or_exhaust_the_machine(
    attempt: str, kb_dir: Path, tmp_path: Path
) -> None:
    text = {**ESCAPES, **BOMBS}[attempt]
    templates = _templates(tmp_path, record__md__j2=f"first line\n{text}\n")
    code, stderr, pages = _render(kb_dir, templates)
    line = _one_line_error(code, stderr)
    assert f"{templates}/record.md.j2:2: " in line and re.search(REFUSED[attempt], line), line
    assert "uid=" not in pages + stderr and "first line" not in pages


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_mistake_in_a_template_is_one_located_line(
    mistake: str, kb_dir: Path, tmp_path: Path
) -> None:
    text, expected = MISTAKES[mistake]
    templates = _templates(tmp_path, record__md__j2=text)
    line = _one_line_error(*_render(kb_dir, templates)[:2])
    assert re.search(expected, line), line


def test_the_line_is_the_included_templates(kb_dir: Path, tmp_path: Path) -> None:
    templates = _templates(
        tmp_path, record__md__j2='a\n{% include "part.j2" %}\n', part__j2="x\ny\n{{ 1 // 0 }}\n"
    )
    line = _one_line_error(*_render(kb_dir, templates)[:2])
    assert f"{templates}/part.j2:3: ZeroDivisionError" in line


@pytest.mark.parametrize(
    "name",
    ["../../outside/secret.txt", "/etc/passwd", "{secret}", "sub/../../outside/secret.txt"],
)
def test_an_include_cannot_leave_the_templates_folder(
    name: str, kb_dir: Path, tmp_path: Path, secret: Path
) -> None:
    include = name.format(secret=secret)
    templates = _templates(tmp_path, record__md__j2=f'{{% include "{include}" %}}\n')
    (templates / "sub").mkdir()
    code, stderr, pages = _render(kb_dir, templates)
    line = _one_line_error(code, stderr)
    assert "not found" in line and SECRET not in pages + stderr


def test_a_link_out_of_the_templates_folder_is_refused(
    kb_dir: Path, tmp_path: Path, secret: Path
) -> None:
    templates = _templates(tmp_path, record__md__j2='{% include "leak.j2" %}\n')
    (templates / "leak.j2").symlink_to(secret)
    code, stderr, pages = _render(kb_dir, templates)
    assert "leads out of the templates folder" in _one_line_error(code, stderr)
    assert SECRET not in pages + stderr

    (templates / "record.md.j2").unlink()
    (templates / "record.md.j2").symlink_to(secret)  # the page template itself
    code, stderr, pages = _render(kb_dir, templates)
    assert "leads out of the templates folder" in _one_line_error(code, stderr)
    assert SECRET not in pages + stderr


def test_a_link_inside_the_templates_folder_is_followed(kb_dir: Path, tmp_path: Path) -> None:
    templates = _templates(tmp_path, real__j2="# {{ plan.title }} (linked)\n")
    (templates / "plan.md.j2").symlink_to(templates / "real.j2")
    code, stderr, pages = _render(kb_dir, templates)
    assert code == 0, stderr
    assert "# Next steps (linked)" in pages


def test_a_fifo_or_a_huge_template_is_refused_without_hanging(kb_dir: Path, tmp_path: Path) -> None:
    templates = _templates(tmp_path, record__md__j2='{% include "fifo.j2" %}\n')
    os.mkfifo(templates / "fifo.j2")
    assert "not a regular file" in _one_line_error(*_render(kb_dir, templates)[:2])
    (templates / "record.md.j2").write_text("x" * (render.MAX_TEMPLATE_BYTES + 1))
    assert "bytes" in _one_line_error(*_render(kb_dir, templates)[:2])


def test_kbgen_diff_renders_its_comment_through_the_same_sandbox(tmp_path: Path) -> None:
    from tests.conftest import PLAN, RECORD

    repo = tmp_path / "repo"
    records = repo / "records"
    (records / "plans").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (records / "plans" / "next-steps.yaml").write_text(PLAN)
    commit(repo, "a plan")
    (records / "ngram-test.yaml").write_text(RECORD)
    templates = _templates(tmp_path, diff__md__j2="{{ cycler.__init__.__globals__ }}\n")
    result = CliRunner().invoke(
        cli, ["diff", "--records", str(records), "--templates", str(templates)]
    )
    line = _one_line_error(result.exit_code, result.stderr)
    assert f"{templates}/diff.md.j2:1: access to attribute '__init__'" in line


def test_template_errors_are_kbgen_errors_for_every_route(tmp_path: Path) -> None:
    templates = _templates(tmp_path, x__md__j2="{% for %}\n")
    with pytest.raises(TemplateError, match=r"x\.md\.j2:1: "):
        render.template("x.md.j2", templates)
