"""The file-system edge: atomic writes, finding YAML files, the fingerprint cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbgen.errors import Conflict, InvalidInput
from kbgen.kb import files


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
