"""Which Chromium the browser tests drive, and what `make browser` says when there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import chromium


def _program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho 'Chromium 1.0'\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No Chromium anywhere: none named, none unpacked, none on PATH, no npm."""
    monkeypatch.delenv(chromium.ENV, raising=False)
    monkeypatch.setattr(chromium, "LAUNCHER", tmp_path / "tools" / "chromium")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path


def test_none_is_found_where_there_is_none(nothing: Path) -> None:
    assert chromium.find() is None


def test_the_named_one_comes_first(nothing: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _program(chromium.LAUNCHER)
    _program(nothing / "bin" / "chromium")
    named = _program(nothing / "mine" / "chrome-headless-shell")
    monkeypatch.setenv(chromium.ENV, str(named))
    assert chromium.find() == named


def test_the_unpacked_one_comes_before_path(nothing: Path) -> None:
    on_path = _program(nothing / "bin" / "chromium")
    assert chromium.find() == on_path
    _program(chromium.LAUNCHER)
    assert chromium.find() == chromium.LAUNCHER


@pytest.mark.parametrize("named", ["missing", "not-executable"])
def test_a_named_one_that_is_no_program_is_refused(
    nothing: Path, monkeypatch: pytest.MonkeyPatch, named: str
) -> None:
    (nothing / "not-executable").write_text("")
    _program(nothing / "bin" / "chromium")  # never taken instead of the one named
    monkeypatch.setenv(chromium.ENV, str(nothing / named))
    assert chromium.find() is None
    with pytest.raises(SystemExit, match=f"{chromium.ENV}=.*{named} is not a program"):
        chromium.provide()


def test_without_npm_root_or_a_chromium_make_browser_says_what_to_install(
    nothing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tests.support.chromium.os.geteuid", lambda: 1000)  # not root
    with pytest.raises(SystemExit) as info:
        chromium.provide()
    message = str(info.value)
    assert message.startswith("npm is not installed: no Chromium for the browser tests")
    assert "make browser" in message and "apt-get install chromium" in message
    assert chromium.ENV in message and "\n" not in message  # one line
