"""The file-system edge: bounded reads of regular files, atomic writes, locks, finding YAML
files, the fingerprint cache."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from kbgen.errors import Conflict, InvalidInput
from kbgen.kb import files
from tests.support import special


def test_write_atomic_replaces_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "page.md"
    files.write_atomic(path, b"one", durable=False)
    files.write_atomic(path, b"two")
    assert path.read_bytes() == b"two"
    assert sorted(p.name for p in path.parent.iterdir()) == ["page.md"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as readable as any new file


def test_write_atomic_without_replace_never_clobbers(tmp_path: Path) -> None:
    path = tmp_path / "record.yaml"
    path.write_bytes(b"theirs")
    with pytest.raises(Conflict, match="already exists"):
        files.write_atomic(path, b"mine", replace=False)
    assert path.read_bytes() == b"theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["record.yaml"]


def test_iter_yaml_files_skips_hidden_and_other_files(tmp_path: Path) -> None:
    for name in ["b.yaml", "a.yml", "notes.md", ".a.yaml.tmp", ".hidden.yaml", "plans/p.yaml"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x: 1\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "c.yaml").write_text("x: 1\n")
    found = files.iter_yaml_files([tmp_path, tmp_path / "b.yaml"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "a.yml",
        "b.yaml",
        "plans/p.yaml",
    ]


def test_fingerprint_cache_trusts_only_unchanged_files_under_the_same_key(tmp_path: Path) -> None:
    data, store_at = tmp_path / "r.yaml", tmp_path / "cache.json"
    data.write_text("x: 1\n")
    cache = files.FingerprintCache(store_at, "rules-1")
    cache.put(data, files.fingerprint(data), ["facts"])
    cache.save()
    assert files.FingerprintCache(store_at, "rules-1").get(data, files.fingerprint(data)) == [
        "facts"
    ]
    assert files.FingerprintCache(store_at, "rules-2").get(data, files.fingerprint(data)) is None
    data.write_text("x: 22\n")
    os.utime(data, ns=(1, 1))
    assert files.FingerprintCache(store_at, "rules-1").get(data, files.fingerprint(data)) is None


def test_free_path_numbers_or_takes_the_suffixes_given(tmp_path: Path) -> None:
    assert files.free_path(tmp_path, "x", ".yaml") == tmp_path / "x.yaml"
    (tmp_path / "x.yaml").write_text("")
    (tmp_path / "x-2.yaml").write_text("")
    assert files.free_path(tmp_path, "x", ".yaml") == tmp_path / "x-3.yaml"
    assert files.free_path(tmp_path, "x", ".yaml", iter(["-2", "-b"])) == tmp_path / "x-b.yaml"


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", r"x\.json:1: not JSON"), ("[1]", r"x\.json:1: expected a JSON object")],
    ids=["not-json", "not-object"],
)
def test_read_json_locates_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "x.json").write_text(content)
    with pytest.raises(InvalidInput, match=message):
        files.read_json(tmp_path / "x.json")


@pytest.mark.parametrize("kind", sorted(special.SPECIAL))
def test_read_regular_refuses_what_is_not_a_regular_file_in_its_folder(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "inputs" / "x.yaml"
    message = special.make(kind, path)
    with special.deadline(5), pytest.raises(InvalidInput) as info:
        files.read_regular(path, 1024)
    [problem] = info.value.problems
    assert (problem.path, problem.line) == (path, None)
    assert problem.message.startswith(message)
    assert special.OUTSIDE.decode() not in str(info.value)


def test_read_regular_follows_a_symlink_that_stays_inside_its_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "real.yaml").write_bytes(b"x: 1\n")
    (tmp_path / "link.yaml").symlink_to("sub/real.yaml")
    assert files.read_regular(tmp_path / "link.yaml", 1024) == b"x: 1\n"
    # the same link is outside when the folder it belongs to is narrower
    (tmp_path / "sub" / "other").mkdir()
    (tmp_path / "sub" / "other" / "up.yaml").symlink_to("../real.yaml")
    with pytest.raises(InvalidInput, match="outside"):
        files.read_regular(tmp_path / "sub" / "other" / "up.yaml", 1024)
    assert files.read_regular(tmp_path / "sub" / "other" / "up.yaml", 1024, tmp_path / "sub")


def test_read_regular_refuses_a_path_through_a_folder_linked_outside(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "data").write_bytes(special.OUTSIDE)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "linked").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InvalidInput, match="outside"):
        files.read_regular(tmp_path / "kb" / "linked" / "data", 1024, tmp_path / "kb")


@pytest.mark.parametrize("size", [0, 10, 11])
def test_read_regular_takes_up_to_the_limit_and_refuses_more(tmp_path: Path, size: int) -> None:
    limit = 10
    path = tmp_path / "x"
    path.write_bytes(b"a" * size)
    if size <= limit:
        assert files.read_regular(path, limit) == b"a" * size
    else:
        with pytest.raises(InvalidInput, match=f"x: too large .*the limit is {limit}"):
            files.read_regular(path, limit)


def test_read_regular_says_no_such_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"nothing\.json: no such file"):
        files.read_json(tmp_path / "nothing.json")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"a": ' + b"1" * 5000 + b"}", r"x\.json: not JSON: Exceeds the limit"),
        (b"[" * 100_000 + b"]" * 100_000, r"x\.json: not JSON: nested too deeply"),
        (b'{"a": "caf\xe9"}', r"x\.json:1: not UTF-8 text \(byte 0xe9\)"),
    ],
    ids=["huge-integer", "deep", "latin-1"],
)
def test_read_json_locates_what_json_cannot_read(
    tmp_path: Path, content: bytes, message: str
) -> None:
    (tmp_path / "x.json").write_bytes(content)
    with pytest.raises(InvalidInput, match=message):
        files.read_json(tmp_path / "x.json")


def test_holds_and_ends_a_line_never_block_on_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "page.md")
    with special.deadline(5):
        assert not files.holds(tmp_path / "page.md", b"text")
        with pytest.raises(InvalidInput, match="not a regular file"):
            files.ends_a_line(tmp_path / "page.md")
        assert files.write_if_changed(tmp_path / "page.md", b"text")  # replaced, not written into
    assert (tmp_path / "page.md").read_bytes() == b"text"


def test_locked_lets_one_holder_in_at_a_time(tmp_path: Path) -> None:
    inside, log = threading.Event(), []

    def second() -> None:
        inside.wait()
        with files.locked(tmp_path):
            log.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    with files.locked(tmp_path):
        inside.set()
        time.sleep(0.2)  # the second holder waits on the lock meanwhile
        log.append("first")
    thread.join(5)
    assert log == ["first", "second"]
    assert os.listdir(tmp_path) == []  # no lock file left behind


def test_read_regular_reads_a_file_growing_as_it_is_read_up_to_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b"0123456789")
    real_fstat = os.fstat

    def smaller(fd: int) -> os.stat_result:  # as the file was before its last appends
        stat = real_fstat(fd)
        return os.stat_result((stat.st_mode, *stat[1:6], 3, *stat[7:]))

    monkeypatch.setattr("kbgen.kb.files.os.fstat", smaller)
    assert files.read_regular(path, 20) == b"0123456789"
    with pytest.raises(InvalidInput, match="too large"):
        files.read_regular(path, 5)


def test_a_temporary_file_is_abandoned_only_when_its_writer_is_gone(tmp_path: Path) -> None:
    gone = special.gone_pid()
    dead = tmp_path / f".page.md.{gone}.0.tmp"
    live = tmp_path / f".page.md.{os.getpid()}.3.tmp"
    other = tmp_path / "page.md"
    for path in (dead, live, other):
        path.write_text("half a page")
    assert files.abandoned(dead)
    assert not files.abandoned(live)
    assert not files.abandoned(other)
    (tmp_path / f".x.{gone}.1.tmp").symlink_to(other)
    assert not files.abandoned(tmp_path / f".x.{gone}.1.tmp")


# (the files a tree holds, with `/` for a folder; where the command runs) -> what it finds
FOUND = [
    (["records/a.yaml"], ".", "records"),
    ([".git/", "records/a.yaml", "sub/deep/"], "sub/deep", "../../records"),
    ([".git/", "records/a.yaml", "records/plans/p.yaml"], "records/plans", "../../records"),
    ([".git/", "records/plans/", "docs/records/a.md"], "docs", "../records"),
    ([".git/", "records/a.yaml", "sub/records/plans/"], "sub", "records"),
    ([".git/", "sub/"], "sub", "../records"),
    (["records/a.yaml", "repo/.git/", "repo/sub/"], "repo/sub", "../records"),
    (["records/a.yaml", "sub/"], "sub", "records"),
    ([".git", "records/a.yaml", "sub/"], "sub", "../records"),  # a worktree's .git is a file
]


@pytest.mark.parametrize(("tree", "here", "found"), FOUND)
def test_the_knowledge_base_is_found_from_anywhere_in_its_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tree: list[str], here: str, found: str
) -> None:
    """The nearest records/ of YAML up to the repository's top; else the top's, or outside a
    repository the current folder's: never one above the repository, nor rendered pages."""
    for name in tree:
        path = tmp_path / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    monkeypatch.chdir(tmp_path / here)
    assert files.find_records() == Path(found)
