"""The secrets corpus through bench → record → render → mkdocs build: no secret in any file
written nor in any message printed, on success and on failure; a resume takes its secrets from
the environment."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kbgen.cli import cli
from kbgen.redact import MASK
from tests.conftest import REPO
from tests.support import fake_server
from tests.support.free_port import free_port
from tests.support.secrets import KEPT_ARGS, KEPT_ENV, args_forms, env_forms, every_secret, s
from tests.support.site import mkdocs

MODEL = f"https://hub-user:{s(60)}@models.example/org/tiny"  # a process launcher's `model:`
FROM_ENV = {"VLLM_API_KEY": s(61), "TOKEN": s(62)}  # what KEPT_ARGS' ${NAME} references read
VARIANT_ARG = f"--hf-token={s(63)}"
SECRETS = [*every_secret(), s(60), s(61), s(62), s(63)]
KEPT = [a for argv in KEPT_ARGS for a in argv]


@dataclass
class Outputs:
    """What every command printed, and the folder they all wrote into."""

    root: Path
    printed: list[str] = field(default_factory=list)

    def kbgen(self, *args: str, code: int = 0) -> Result:
        result = CliRunner().invoke(cli, list(args))
        self.printed += [result.stdout, result.stderr]
        assert result.exit_code == code, result.output
        return result


def _spec(folder: Path, server: dict[str, Any], variant_args: list[str]) -> Path:
    """The spec (and its prompts) in `folder`, the one place the secrets are written in full."""
    folder.mkdir(exist_ok=True)
    prompts = folder / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"class": c, "prompt": f"{c} {i}"}) + "\n"
            for c in ("a", "b")
            for i in (0, 1)
        )
    )
    spec = {
        "schema_version": 1,
        "id": "secrets",
        "title": "the secrets corpus",
        "hypothesis": {
            "statement": "s",
            "primary_metric": "decode_tok_s",
            "direction": "increase",
            "minimum_effect": 0.05,
        },
        "server": server,
        "baseline": "base",
        "variants": {"base": {}, "other": {"args": variant_args}},
        "workload": {"prompts": str(prompts), "classes": ["a", "b"], "repeats": 1, "warmup": 1},
    }
    path = folder / f"spec-{server['launcher']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _corpus_server(command: list[str]) -> dict[str, Any]:
    """A process server with every form of the corpus in its arguments and environment."""
    env = {k: v for k, v in KEPT_ENV.items() if k != "PATH"}
    for form in env_forms():
        assert isinstance(form.given, dict)
        env |= form.given
    return {
        "launcher": "process",
        "command": command,
        "model": MODEL,
        "args": [a for form in args_forms() for a in form.given] + KEPT,
        "env": env,
        "port": free_port(),
        "startup_timeout_s": 30,
    }


def _every_file(root: Path) -> dict[Path, str]:
    """Every file under `root` as text (gzip unpacked): what kbgen and mkdocs wrote."""
    out = {}
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            out[path] = (gzip.decompress(data) if path.suffix == ".gz" else data).decode(
                errors="replace"
            )
    return out


def _leaks(texts: dict[Any, str]) -> dict[str, list[str]]:
    return {
        str(where): found
        for where, text in texts.items()
        if (found := [secret for secret in SECRETS if secret in text])
    }


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Outputs:
    """bench → record → render → mkdocs build of the corpus, in a copy of the repository's site."""
    root = tmp_path_factory.mktemp("secrets")
    for name in ("docs", "records"):
        shutil.copytree(REPO / name, root / name)
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    out = Outputs(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        for name, value in FROM_ENV.items():
            patch.setenv(name, value)
        server = _corpus_server([sys.executable, fake_server.__file__])
        spec = _spec(tmp_path_factory.mktemp("input"), server, [VARIANT_ARG])
        run = out.kbgen("bench", str(spec), "--runs", "runs").stdout.strip().splitlines()[-1]
        out.kbgen("record", run, "--records", "records")
        out.kbgen("render", "--records", "records", "--docs", "docs")
    built = mkdocs("build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(root / "site"))
    out.printed += [built.stdout, built.stderr]
    assert built.returncode == 0, built.stderr
    return out


@pytest.mark.slow  # over 10 s: not in the fast lane
def test_no_secret_in_any_file_written(pipeline: Outputs) -> None:
    files = _every_file(pipeline.root)
    written = [p.relative_to(pipeline.root).parts[0] for p in files]
    assert {"runs", "records", "docs", "site"} <= set(written)
    assert any(p.name == "search_index.json" for p in files)
    assert any(p.suffix == ".log" for p in files)  # the server's own output, which echoed them
    assert _leaks(files) == {}


def test_no_secret_in_any_message(pipeline: Outputs) -> None:
    assert _leaks(dict(enumerate(pipeline.printed))) == {}


def test_the_record_keeps_every_name_and_every_other_argument(pipeline: Outputs) -> None:
    [path] = [p for p in (pipeline.root / "records").glob("*-secrets.yaml")]
    record = yaml.safe_load(path.read_text())
    expected = [a for form in args_forms() for a in form.expected] + KEPT
    assert record["config"]["server_args"] == expected  # nothing shifted, nothing lost
    assert record["config"]["variants"]["other"]["args"] == [f"--hf-token={MASK}"]
    assert record["config"]["model"]["name"] == f"https://hub-user:{MASK}@models.example/org/tiny"
    [run] = list((pipeline.root / "runs").iterdir())
    meta = json.loads((run / "run.json").read_text())
    assert meta["variants"]["base"]["env"]["HF_TOKEN"] == MASK
    assert meta["variants"]["base"]["env"]["VLLM_API_KEY"] == "${VLLM_API_KEY}"
    summary = json.loads((run / "summary.json").read_text())  # labels masked as the name is
    assert [v["tokens_match"] for v in summary["variants"].values()] == [True, True]
    copy = yaml.safe_load((run / "spec.yaml").read_text())
    assert (
        copy["server"]["args"] == expected
        and copy["server"]["model"] == record["config"]["model"]["name"]
    )


@pytest.mark.parametrize(
    "server",
    [
        pytest.param(
            {
                "launcher": "command",
                "start": f"HF_TOKEN={s(70)} sh -c 'echo starting --api-key {s(71)} "
                f'-H "Authorization: Bearer {s(72)}"; exit 3\'',
                "url": f"http://kb:{s(73)}@127.0.0.1:{free_port()}",
            },
            id="a-command-launcher-that-fails",
        ),
        pytest.param(
            {
                "launcher": "external",
                "url": f"http://kb:{s(74)}@127.0.0.1:{free_port()}",
                "startup_timeout_s": 1,
            },
            id="an-external-server-that-never-answers",
        ),
        pytest.param(
            # a server that writes its environment and what it was given (last: the line the error
            # names), one argument a line, and dies
            _corpus_server(["sh", "-c", 'env; printf "%s\\n" "$@"; echo "$@"; exit 3', "sh"]),
            id="a-process-that-echoes-its-arguments-and-dies",
        ),
    ],
)
def test_a_failed_start_leaks_nothing(
    server: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in FROM_ENV.items():
        monkeypatch.setenv(name, value)
    out = Outputs(tmp_path)
    spec = _spec(tmp_path / "input", server, [VARIANT_ARG])
    out.kbgen("bench", str(spec), "--runs", "runs", code=5)
    assert "error:" in out.printed[1] and MASK in "".join(out.printed)
    files = _every_file(tmp_path / "runs")
    assert any(p.suffix == ".log" for p in files) or server["launcher"] == "external"
    secrets = [v for v in json.dumps(server).split('"') if "S3cr3t" in v]
    assert secrets  # the spec had some to leak
    assert _leaks(dict(enumerate(out.printed))) == {} and _leaks(files) == {}


def test_a_resume_takes_the_secrets_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = tmp_path / "started-with.json"
    server = {
        "launcher": "process",
        "command": [sys.executable, fake_server.__file__],
        "model": "m",
        "args": ["--api-key", "${KBGEN_TEST_KEY}", "--dump-to", str(dump)],
        "env": {"HF_TOKEN": "${KBGEN_TEST_HF}"},
        "port": free_port(),
        "startup_timeout_s": 30,
    }
    spec = _spec(tmp_path / "input", server, [])
    out = Outputs(tmp_path)
    monkeypatch.delenv("KBGEN_TEST_KEY", raising=False)
    refused = out.kbgen("bench", str(spec), "--runs", "runs", code=1)
    assert re.search(
        r"spec-process.yaml:\d+: server.args\[1\]: "
        r"\$\{KBGEN_TEST_KEY\} is not set in the environment",
        refused.stderr,
    ), refused.stderr
    assert not (tmp_path / "runs").exists()  # refused before a run folder was made

    monkeypatch.setenv("KBGEN_TEST_KEY", s(80))
    monkeypatch.setenv("KBGEN_TEST_HF", s(81))
    from kbgen.bench import provenance
    from kbgen.run.folder import RunFolder
    from kbgen.run.spec import load

    loaded = load(spec)  # a run interrupted before its first window: nothing measured yet
    folder = RunFolder.create(
        tmp_path / "runs", loaded.id, spec.read_text(), provenance.new_meta(loaded)
    )
    folder.update_meta(status="interrupted")
    out.kbgen("bench", "--resume", str(folder.path))
    started = json.loads(dump.read_text())
    assert started["argv"][started["argv"].index("--api-key") + 1] == s(80)
    assert started["env"]["HF_TOKEN"] == s(81)
    assert json.loads((folder.path / "run.json").read_text())["status"] == "complete"
    leaked = [
        v
        for v in (s(80), s(81))
        if v in "".join([*_every_file(folder.path).values(), *out.printed])
    ]
    assert leaked == []


def test_a_resume_refuses_a_copy_whose_secret_was_masked(tmp_path: Path) -> None:
    server = {"launcher": "external", "url": f"http://kb:{s(82)}@127.0.0.1:{free_port()}"}
    spec = _spec(tmp_path / "input", server, ["--api-key", s(83)])
    from kbgen.bench import provenance
    from kbgen.run.folder import RunFolder
    from kbgen.run.spec import load

    loaded = load(spec)
    folder = RunFolder.create(
        tmp_path / "runs", loaded.id, spec.read_text(), provenance.new_meta(loaded)
    )
    out = Outputs(tmp_path)
    refused = out.kbgen("bench", "--resume", str(folder.path), code=1)
    assert re.search(r"spec.yaml:\d+: server.url: masked in this copy of the spec", refused.stderr)
    assert re.search(r"spec.yaml:\d+: variants.other.args\[1\]: masked in", refused.stderr)
    assert s(82) not in (folder.path / "spec.yaml").read_text()
    assert os.environ.get("KBGEN_TEST_KEY") is None


def test_every_error_message_is_masked_on_its_way_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last line of defence: whatever message an error carries, the CLI prints it masked."""
    from kbgen.errors import ServerFailed
    from kbgen.kb import scaffold

    def fails(*args: object, **kwargs: object) -> None:
        raise ServerFailed(f"http://kb:{s(90)}@h: refused\nretry with --api-key {s(91)}")

    monkeypatch.setattr(scaffold, "new_record", fails)
    result = CliRunner().invoke(cli, ["new", "a title"])
    assert result.exit_code == 5
    assert (
        result.stderr == f"error: http://kb:{MASK}@h: refused\nerror: retry with --api-key {MASK}\n"
    )


def test_a_bug_s_message_is_masked_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last-resort output of `kbgen` (an exception kbgen did not expect) is masked as well."""
    from kbgen import cli as cli_module
    from kbgen.kb import scaffold

    def fails(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"cannot parse http://kb:{s(92)}@h")

    monkeypatch.setattr(scaffold, "new_record", fails)
    monkeypatch.setattr(sys, "argv", ["kbgen", "new", "a title"])
    with pytest.raises(SystemExit) as exited:
        cli_module.main()
    assert exited.value.code == 1
    assert (
        capsys.readouterr().err
        == f"error: internal error: RuntimeError: cannot parse http://kb:{MASK}@h\n"
    )
