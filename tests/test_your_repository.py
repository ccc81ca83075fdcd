"""A user's own repository, end to end, as the README tells it: `git init`, `kbgen init`, an
import of `vllm bench serve`'s files with `--spec` and `--prompts`, `kbgen render`, `mkdocs
build --strict`, `kbgen check`, a branch and `kbgen diff` — each step a real command in its
own process, its exit code and its output checked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support import unrendered

IMPORTS = REPO / "tests" / "fixtures" / "imports"
BIN = Path(sys.executable).parent


def _step(repo: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """`command` run in `repo` with the venv's programs first on PATH; its output shown if it
    fails."""
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "NO_MKDOCS_2_WARNING": "1",
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@example.org",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@example.org",
    }
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}{done.stderr}"
    return done


@pytest.mark.slow  # over 10 s: not in the fast lane
def test_a_knowledge_base_in_a_user_s_own_repository(tmp_path: Path) -> None:
    repo = tmp_path / "our-models"
    repo.mkdir()
    _step(repo, "git", "init", "-q", "-b", "main")
    started = _step(repo, "kbgen", "init").stdout
    assert "wrote mkdocs.yml" in started and "wrote .github/workflows/kbgen-review.yml" in started
    assert "rendered" in started and "kept" not in started
    _step(repo, "git", "add", "-A")
    _step(repo, "git", "commit", "-q", "-m", "a knowledge base")

    # an experiment on a branch: two vllm bench serve result files and the spec they ran
    _step(repo, "git", "checkout", "-q", "-b", "ngram")
    (repo / "results").mkdir()
    for arm in ("baseline", "ngram"):
        shutil.copy(IMPORTS / f"vllm-bench-chat-{arm}.json", repo / "results" / f"{arm}.json")
    shutil.copy(IMPORTS / "prompts.jsonl", repo / "prompts.jsonl")
    spec = (IMPORTS / "vllm-bench-chat-spec.yaml").read_text()
    spec = spec.replace("tests/fixtures/imports/prompts.jsonl", "prompts.jsonl")
    (repo / "spec.yaml").write_text(spec + "resolves: [first-plan#first-change]\n")
    imported = _step(
        repo,
        "kbgen",
        "record",
        "--from",
        "vllm-bench",
        "baseline=results/baseline.json",
        "ngram=results/ngram.json",
        "--spec",
        "spec.yaml",
        "--prompts",
        "prompts.jsonl",
    )
    record = repo / imported.stdout.strip().splitlines()[-1]
    assert record.parent == repo / "records" and record.suffix == ".yaml"
    text = record.read_text()
    assert "num_speculative_tokens: 5" in text and "concurrency: 1" in text  # its setup kept
    assert "classes:\n    - coding\n    - explanatory" in text

    assert "file(s) written" in _step(repo, "kbgen", "render").stdout
    page = repo / "docs" / "records" / f"{record.stem}.md"
    assert "n-gram speculative decoding vs baseline on the tiny Llama" in page.read_text()
    plan = (repo / "docs" / "plans" / "first-plan.md").read_text()
    assert f"](../records/{record.stem}.md)" in plan  # the task it resolves links to it

    _step(repo, "mkdocs", "build", "--strict")
    built = repo / "site" / "records" / record.stem / "index.html"
    assert unrendered.leftovers(built.read_text()) == []
    assert "coding" in built.read_text() and "explanatory" in built.read_text()

    _step(repo, "git", "add", "-A")
    _step(repo, "git", "commit", "-q", "-m", "n-gram, imported")
    shutil.rmtree(repo / ".kbgen_cache")  # as CI's fresh checkout has none
    checked = _step(repo, "kbgen", "check")
    assert checked.stdout.startswith("ok:"), checked.stdout
    diff = _step(repo, "kbgen", "diff", "main", "HEAD").stdout
    assert diff.startswith("<!-- kbgen-diff -->\n")
    assert "**1 new · 0 changed · 0 removed** record(s)" in diff
    assert f"(`{record.stem}`)" in diff and "imported from vllm bench serve" in diff
    assert "`first-plan#first-change`" in diff  # the task its record ticks
