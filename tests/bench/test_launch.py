"""Launchers against loopback stand-ins: a server that never gets healthy, one that dies."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from kbgen.bench.launch import Launched, ProcessLauncher, why
from kbgen.errors import ServerFailed
from kbgen.kb.models import Variant
from kbgen.run.spec import ProcessServer
from tests.support.free_port import free_port
from tests.support.processes import still_running


def _launch(script: str, tmp_path: Path, timeout_s: float = 3.0) -> tuple[ProcessLauncher, Path]:
    server = ProcessServer(
        launcher="process",
        command=[sys.executable, "-c", script],
        model="m",
        port=free_port(),
        startup_timeout_s=timeout_s,
    )
    return ProcessLauncher(server), tmp_path / "logs" / "v.log"


def test_never_healthy_times_out_naming_its_last_line(tmp_path: Path) -> None:
    script = "import time, sys\nprint('loading weights 37%', flush=True)\ntime.sleep(600)"
    launcher, log = _launch(script, tmp_path, timeout_s=2.0)
    waited: list[float] = []
    with pytest.raises(
        ServerFailed,
        match=r"^\S+ not healthy after 2 s: its last line: loading weights 37% \(in .*v.log\)$",
    ):
        asyncio.run(launcher.start("v", Variant(), log, waited.append))
    assert waited and not launcher.alive()  # it reported the wait, and stopped the process


def test_a_server_that_exits_fails_fast(tmp_path: Path) -> None:
    script = "print('CUDA out of memory', flush=True)\nraise SystemExit(3)"
    launcher, log = _launch(script, tmp_path, timeout_s=60)
    with pytest.raises(ServerFailed, match=r"exited with code 3 while starting: .*out of memory"):
        asyncio.run(launcher.start("v", Variant(), log, lambda s: None))


def test_the_command_gets_model_args_and_the_variant(tmp_path: Path) -> None:
    launcher, _ = _launch("", tmp_path)
    variant = Variant.model_validate(
        {
            "args": ["--x", "1"],
            "speculative_config": {"method": "ngram", "num_speculative_tokens": 3},
        }
    )
    argv = launcher.command(variant)
    assert argv[3:] == [
        "m",
        "--x",
        "1",
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":3}',
        "--host",
        "127.0.0.1",
        "--port",
        str(launcher.server.port),
    ]


def test_a_missing_command_is_a_clear_error(tmp_path: Path) -> None:
    server = ProcessServer(
        launcher="process", command=["/no/such/vllm"], model="m", port=free_port()
    )
    with pytest.raises(ServerFailed, match="cannot start '/no/such/vllm'"):
        asyncio.run(
            ProcessLauncher(server).start("v", Variant(), tmp_path / "l.log", lambda s: None)
        )


def test_why_of_a_missing_log() -> None:
    assert why(Path("/no/such.log")) == "no log at /no/such.log"


def test_command_launcher_runs_the_user_s_commands(tmp_path: Path) -> None:
    from aiohttp.test_utils import TestServer

    from kbgen.bench.launch import CommandLauncher
    from kbgen.run.spec import CommandServer
    from tests.support.fake_server import FakeVllm

    log = tmp_path / "v.log"
    variant = Variant.model_validate(
        {"speculative_config": {"method": "ngram", "num_speculative_tokens": 5}}
    )

    async def go() -> tuple[list[str], str]:
        server = TestServer(FakeVllm().app(), host="127.0.0.1")
        await server.start_server()
        try:
            launcher = CommandLauncher(
                CommandServer(
                    launcher="command",
                    url=str(server.make_url("")),
                    start="echo starting unit {variant} with {args} in ${KB_UNIT:-none}; "
                    "echo {} | awk '{print \"braces\", $1}'; : HF_TOKEN=hf_secretsecret",
                    stop="echo stopping unit {variant}",
                )
            )
            launched = await launcher.start("ngram", variant, log, lambda s: None)
            await launcher.stop()
            return launched.command, log.read_text()
        finally:
            await server.close()

    command, text = asyncio.run(go())
    assert "starting unit ngram with --speculative-config" in text
    assert "in none\n" in text and "braces {}" in text  # the shell's braces are the shell's
    assert '{"method":"ngram","num_speculative_tokens":5}' in text
    assert "stopping unit ngram" in text
    assert "hf_secretsecret" not in text and "hf_secretsecret" not in " ".join(command)


def test_command_launcher_failing_start_is_a_clear_error(tmp_path: Path) -> None:
    from kbgen.bench.launch import CommandLauncher
    from kbgen.run.spec import CommandServer

    launcher = CommandLauncher(
        CommandServer(
            launcher="command", url="http://127.0.0.1:9", start="echo unit not found; exit 4"
        )
    )
    with pytest.raises(ServerFailed, match=r"exited with code 4: its last line: unit not found"):
        asyncio.run(launcher.start("v", Variant(), tmp_path / "v.log", lambda s: None))


def test_command_launcher_failing_start_leaks_no_secret_its_words_split(tmp_path: Path) -> None:
    from kbgen.bench.launch import CommandLauncher
    from kbgen.run.spec import CommandServer

    secret = "S3cr3t-split-words"
    start = f"echo Authorization: bearer {secret}; exit 1"  # the header unquoted: four words
    launcher = CommandLauncher(
        CommandServer(launcher="command", url="http://127.0.0.1:9", start=start)
    )
    with pytest.raises(ServerFailed) as failed:
        asyncio.run(launcher.start("v", Variant(), tmp_path / "v.log", lambda s: None))
    assert "exited with code 1" in str(failed.value)
    assert secret not in str(failed.value) and secret not in (tmp_path / "v.log").read_text()


def test_command_launcher_reuses_a_server_started_with_the_same_command(tmp_path: Path) -> None:
    from aiohttp.test_utils import TestServer

    from kbgen.bench.launch import CommandLauncher
    from kbgen.run.spec import CommandServer
    from tests.support.fake_server import FakeVllm

    log = tmp_path / "v.log"
    ngram = Variant.model_validate({"args": ["--max-num-seqs", "4"]})

    async def go() -> list[bool]:
        server = TestServer(FakeVllm().app(), host="127.0.0.1")
        await server.start_server()
        try:
            launcher = CommandLauncher(
                CommandServer(
                    launcher="command",
                    url=str(server.make_url("")),
                    start="echo starting {variant}",
                    stop="echo stopping {variant}",
                )
            )
            reused = []
            for name, variant in [("a", Variant()), ("b", ngram), ("b", ngram), ("a", Variant())]:
                reused.append((await launcher.start(name, variant, log, lambda s: None)).reused)
            await launcher.stop()
            return reused
        finally:
            await server.close()

    assert asyncio.run(go()) == [False, False, True, False]
    lines = [line for line in log.read_text().splitlines() if not line.startswith("$")]
    assert lines == [
        "starting a",
        "stopping a",
        "starting b",
        "stopping b",
        "starting a",
        "stopping a",
    ]


def test_every_start_has_its_command_line_even_after_a_torn_last_line(tmp_path: Path) -> None:
    """A server stopped mid-line leaves no newline; the next start's `$ …` is a line of its own."""
    script = "import sys; sys.stdout.write('a line the server never ended'); raise SystemExit(3)"
    launcher, log = _launch(script, tmp_path, timeout_s=60)
    for _ in range(2):
        with pytest.raises(ServerFailed, match="exited with code 3"):
            asyncio.run(launcher.start("v", Variant(), log, lambda s: None))
    lines = log.read_text().splitlines()
    assert [line.startswith("$ ") for line in lines] == [True, False, True, False]
    assert lines[1] == "a line the server never ended"


# --- why a server failed, in one line ----------------------------------------------------------

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm-logs"


def test_a_dead_server_is_named_by_the_first_error_of_its_processes(tmp_path: Path) -> None:
    """The GPU proof run's failure: the cause 85 lines above the API server's last words."""
    fixture = LOGS / "gpu-0.26-flashinfer-failure.log"
    script = (
        f"import sys\nsys.stdout.write(open({str(fixture)!r}).read().split('\\n', 1)[1])\n"
        "raise SystemExit(1)"
    )
    launcher, log = _launch(script, tmp_path, timeout_s=60)
    with pytest.raises(ServerFailed) as failed:
        asyncio.run(launcher.start("ngram", Variant(), log, lambda s: None))
    message = str(failed.value)
    assert message == (
        "the server for variant 'ngram' exited with code 1 while starting: EngineCore: "
        f"ModuleNotFoundError: No module named 'flashinfer' (the first error in {log})"
    )
    assert "See root cause above" in log.read_text()  # the rest stays in the log


def test_the_cause_names_the_last_launch_only(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "v.log"
    log.parent.mkdir()
    log.write_text("$ serve\nERROR:    an earlier launch's failure\n")
    launcher, _ = _launch("print('loading 12%', flush=True)\nraise SystemExit(2)", tmp_path, 60)
    with pytest.raises(ServerFailed, match=r"code 2 while starting: its last line: loading 12%"):
        asyncio.run(launcher.start("v", Variant(), log, lambda s: None))


def test_a_timed_out_server_is_not_named_by_its_own_shutdown(tmp_path: Path) -> None:
    """What a server says as it is stopped (a KeyboardInterrupt traceback) is not why it failed."""
    script = (
        "import signal, sys, time\n"
        "def stop(*_):\n"
        "    print('Traceback (most recent call last):', flush=True)\n"
        "    print('KeyboardInterrupt: terminated', flush=True)\n"
        "    sys.exit(1)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('compiling the model', flush=True)\n"
        "time.sleep(600)\n"
    )
    launcher, log = _launch(script, tmp_path, timeout_s=2.0)
    with pytest.raises(ServerFailed, match=r"after 2 s: its last line: compiling the model \(in "):
        asyncio.run(launcher.start("v", Variant(), log, lambda s: None))
    assert "KeyboardInterrupt" in log.read_text()


def test_a_secret_in_the_cause_is_masked(tmp_path: Path) -> None:
    secret = "hf_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv"
    script = (
        f"print('ERROR:    cannot log in with HF_TOKEN={secret}', flush=True)\nraise SystemExit(1)"
    )
    launcher, log = _launch(script, tmp_path, timeout_s=60)
    with pytest.raises(ServerFailed) as failed:
        asyncio.run(launcher.start("v", Variant(), log, lambda s: None))
    assert "cannot log in with HF_TOKEN=" in str(failed.value)
    assert secret not in str(failed.value) and secret not in log.read_text()


# --- start-up time ------------------------------------------------------------------------------


def test_a_launch_is_timed_until_the_server_answers_healthy(tmp_path: Path) -> None:
    from tests.support import fake_server

    delay = 1.5
    server = ProcessServer(
        launcher="process",
        command=[sys.executable, fake_server.__file__],
        model="m",
        args=["--health-delay", str(delay)],
        port=free_port(),
        startup_timeout_s=60,
    )
    launcher = ProcessLauncher(server)
    log = tmp_path / "v.log"

    async def go() -> tuple[Launched, Launched]:
        try:
            first = await launcher.start("v", Variant(), log, lambda s: None)
            again = await launcher.start("v", Variant(), log, lambda s: None)
            return first, again
        finally:
            await launcher.stop()

    first, again = asyncio.run(go())
    assert first.startup_s is not None and first.startup_s >= delay
    assert again.reused and again.startup_s is None  # a reused server is no launch


def test_a_server_that_dies_leaves_none_of_its_processes_behind(tmp_path: Path) -> None:
    """vLLM's API server that fails at start, or is killed, leaves its engine core running
    (holding the GPU's memory for the next launch): stopping the server ends its whole group."""
    pidfile = tmp_path / "worker.pid"
    script = (
        "import subprocess, sys\n"
        "worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(worker.pid))\n"
        "raise SystemExit(1)  # the leader dies; its worker, in its group, lives on\n"
    )
    launcher, log = _launch(script, tmp_path, timeout_s=60)
    with pytest.raises(ServerFailed, match="exited with code 1 while starting"):
        asyncio.run(launcher.start("v", Variant(), log, lambda s: None))
    worker = int(pidfile.read_text())
    assert still_running([worker]) == []  # SIGKILL'd with its group


def test_a_server_has_its_own_process_group_in_kbgen_s_session(tmp_path: Path) -> None:
    """Its own group: stop() ends its workers with it. kbgen's session: on Linux a session is
    a scheduler autogroup, and a server in one of its own shared the CPU as a unit against the
    client; on a busy machine its API process then sent a whole stream in one piece at the end."""
    from tests.support import fake_server

    server = ProcessServer(
        launcher="process",
        command=[sys.executable, fake_server.__file__],
        model="m",
        port=free_port(),
        startup_timeout_s=60,
    )
    launcher = ProcessLauncher(server)

    async def go() -> tuple[int, int, int]:
        try:
            launched = await launcher.start("v", Variant(), tmp_path / "v.log", lambda s: None)
            assert launched.pid is not None
            return launched.pid, os.getpgid(launched.pid), os.getsid(launched.pid)
        finally:
            await launcher.stop()

    pid, group, session = asyncio.run(go())
    assert group == pid != os.getpgid(0)
    assert session == os.getsid(0)
