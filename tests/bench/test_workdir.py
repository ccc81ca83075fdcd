"""A spec's relative paths are read from its `workdir` (its own folder by default), wherever
kbgen runs: the prompts, and a `process` server's command, model and arguments."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.errors import InvalidInput
from kbgen.run import spec as spec_module
from kbgen.run.folder import RunFolder
from tests.support import fake_server
from tests.support.free_port import free_port

SPEC = {
    "schema_version": 1,
    "id": "paths",
    "title": "relative paths",
    "hypothesis": {
        "statement": "s",
        "primary_metric": "decode_tok_s",
        "direction": "increase",
        "minimum_effect": 0.05,
    },
    "baseline": "a",
    "variants": {"a": {}, "b": {"args": ["--b"]}},
    "workload": {
        "prompts": "prompts/p.jsonl",
        "classes": ["coding"],
        "warmup": 0,
        "repeats": 1,
        "rounds": 1,
        "max_tokens": 4,
    },
}


def _project(root: Path, workdir: str | None, port: int) -> Path:
    """A project: its prompts and its server's program under `root`, the spec two folders
    down in experiments/ab/; returns the spec's path."""
    (root / "prompts").mkdir(parents=True)
    lines = [json.dumps({"class": "coding", "prompt": f"p{i}"}) for i in range(2)]
    (root / "prompts" / "p.jsonl").write_text("\n".join(lines) + "\n")
    (root / "tools").mkdir()
    python = root / "tools" / "python"  # a relative executable: the venv's, by a wrapper
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    (root / "tools" / "serve.py").write_text(
        f"import runpy\nrunpy.run_path({fake_server.__file__!r}, run_name='__main__')\n"
    )
    server = {
        "launcher": "process",
        "command": ["tools/python", "tools/serve.py"],
        "model": "models/m",
        "port": port,
        "startup_timeout_s": 60,
    }
    spec = {**SPEC, "server": server} | ({"workdir": workdir} if workdir else {})
    path = root / "experiments" / "ab" / "spec.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_relative_paths_are_read_from_the_spec_s_folder_by_default(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        yaml.safe_dump({**SPEC, "server": {"launcher": "external", "url": "http://127.0.0.1:1"}})
    )
    spec = spec_module.load(path)
    assert spec.folder == tmp_path.resolve()
    assert spec.path("prompts/p.jsonl") == tmp_path.resolve() / "prompts" / "p.jsonl"
    assert spec.path("/abs/p.jsonl") == Path("/abs/p.jsonl")


def test_a_workdir_that_is_no_folder_is_one_located_line(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    server = {"launcher": "external", "url": "http://127.0.0.1:1"}
    path.write_text(
        yaml.safe_dump({**SPEC, "server": server, "workdir": "nowhere"}, sort_keys=False)
    )
    with pytest.raises(InvalidInput) as caught:
        spec_module.load(path)
    line = str(caught.value).splitlines()[0]
    assert f"{path}:" in line and "workdir" in line
    assert f"{tmp_path.resolve() / 'nowhere'} is not a folder" in line


@pytest.mark.parametrize("workdir", ["../..", None])
def test_bench_reads_prompts_and_starts_the_server_where_the_spec_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workdir: str | None
) -> None:
    root = tmp_path / "project"
    if workdir is None:  # the default: everything beside the spec
        path = _project(tmp_path / "project", None, free_port())
        for name in ("prompts", "tools"):
            (root / name).rename(path.parent / name)
    else:
        path = _project(root, workdir, free_port())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # kbgen runs in a folder that has none of it
    result = CliRunner().invoke(cli, ["bench", str(path), "--runs", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    folder = RunFolder.open(Path(result.stdout.strip().splitlines()[-1]))
    meta = folder.meta()
    assert meta.status == "complete"
    assert Path(meta.workdir or "") == path.parent.joinpath(workdir or ".").resolve()
    assert meta.software is not None and meta.software.python  # found through tools/python
    assert len(folder.samples()) == 4  # 2 prompts x 2 arms, read from the project's file
    assert folder.spec().folder == Path(meta.workdir or "")
    assert folder.spec().path("prompts/p.jsonl").is_file()
    assert not any(os.scandir(elsewhere))  # nothing written where kbgen ran
