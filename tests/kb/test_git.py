"""The git edge, on a real temporary repository: revisions, branches, files at a revision."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbgen.errors import UsageError
from kbgen.kb import git
from tests.support.git import git as git_command

FIRST = {
    "records/a.yaml": b"id: a\n",
    "records/plans/p.yaml": b"id: p\n",
    "records/\u00fc b.yaml": b"id: u\n",  # a space and a non-ASCII letter in the name
    "notes/x.txt": b"not the knowledge base\n",
}


run = git_command  # the one throw-away-repository helper of tests/support


def write(repo: Path, files: dict[str, bytes]) -> None:
    for name, content in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(content)


def commit(repo: Path, message: str) -> str:
    run(repo, "add", "-A")
    run(repo, "commit", "-q", "-m", message)
    return run(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """main with one commit; the branch `feature`, checked out, one commit further."""
    root = tmp_path / "repo"
    root.mkdir()
    run(root, "init", "-q", "-b", "main")
    write(root, FIRST)
    (root / "records" / "link.yaml").symlink_to("a.yaml")  # not a regular file: never listed
    first = commit(root, "first")
    run(root, "checkout", "-q", "-b", "feature")
    write(root, {"records/a.yaml": b"id: a\ntitle: changed\n", "records/b.yaml": b"id: b\n"})
    second = commit(root, "second")
    return root, {"first": first, "second": second}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


# --- where and which revision ----------------------------------------------------------------


@pytest.mark.parametrize("inside", [".", "records", "records/plans", "records/a.yaml"])
def test_toplevel_from_anywhere_inside(repo: tuple[Path, dict[str, str]], inside: str) -> None:
    root, _ = repo
    assert git.toplevel(root / inside) == root.resolve()


def test_toplevel_outside_a_repository(outside: Path) -> None:
    with pytest.raises(UsageError, match=r"outside: not inside a git repository"):
        git.toplevel(outside)


@pytest.mark.parametrize(
    ("rev", "expected"),
    [("HEAD", "second"), ("feature", "second"), ("main", "first"), ("HEAD~1", "first")],
)
def test_commit_of_names_the_full_commit(
    repo: tuple[Path, dict[str, str]], rev: str, expected: str
) -> None:
    root, commits = repo
    assert git.commit_of(root, rev) == commits[expected]
    assert commits[expected].startswith(git.short(root, rev))


@pytest.mark.parametrize("rev", ["mian", "HEAD~5", "HEAD:records"])  # a tree is not a commit
def test_an_unknown_revision(repo: tuple[Path, dict[str, str]], rev: str) -> None:
    root, _ = repo
    with pytest.raises(UsageError, match=rf"^unknown git revision '{rev}'$"):
        git.commit_of(root, rev)
    with pytest.raises(UsageError, match=r"unknown git revision"):
        git.blobs_at(root, rev, "records")


def test_head_sha(repo: tuple[Path, dict[str, str]], outside: Path) -> None:
    root, commits = repo
    assert git.head_sha(root / "records") == commits["second"]
    assert git.head_sha(outside) is None  # provenance without git, not an error


def test_the_checkout_of_a_file_is_the_one_that_tracks_it(
    repo: tuple[Path, dict[str, str]], outside: Path
) -> None:
    root, _ = repo
    (root / ".gitignore").write_text(".venv/\n")
    write(root, {".venv/pkg/__init__.py": b"", "untracked.py": b""})
    assert git.checkout_of(root / "records" / "a.yaml") == root.resolve()
    assert git.checkout_of(root / ".venv" / "pkg" / "__init__.py") is None  # ignored
    assert git.checkout_of(root / "untracked.py") is None  # inside, but no commit holds it
    write(outside, {"x.py": b""})
    assert git.checkout_of(outside / "x.py") is None


def test_changes_of_the_whole_work_tree_or_of_one_folder(
    repo: tuple[Path, dict[str, str]], outside: Path
) -> None:
    root, _ = repo
    assert git.has_changes(root / "records") is False
    write(root, {"notes/x.txt": b"changed\n"})
    assert git.has_changes(root / "records") is True
    assert git.has_changes(root / "records", only_inside=True) is False
    assert git.has_changes(root / "notes", only_inside=True) is True
    assert git.has_changes(outside, only_inside=True) is None


def test_git_not_installed(
    repo: tuple[Path, dict[str, str]], outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = repo
    monkeypatch.setenv("PATH", str(outside))
    with pytest.raises(UsageError, match=r"^git is not installed; kbgen diff needs it$"):
        git.merge_base(root, "main", "feature")
    assert git.head_sha(root) is None
    assert git.checkout_of(root / "records" / "a.yaml") is None


# --- branches --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("refs", "expected"),
    [
        ([], "main"),
        (["refs/heads/master"], "main"),  # main comes first
        (["refs/remotes/origin/master"], "origin/master"),
        (["refs/remotes/origin/main", "refs/remotes/origin/master"], "origin/main"),
    ],
)
def test_main_branch_is_the_first_that_exists(
    repo: tuple[Path, dict[str, str]], refs: list[str], expected: str
) -> None:
    root, commits = repo
    for ref in refs:
        run(root, "update-ref", ref, commits["first"])
    assert git.main_branch(root) == expected


def test_main_branch_origin_head_first(repo: tuple[Path, dict[str, str]]) -> None:
    root, commits = repo
    run(root, "update-ref", "refs/remotes/origin/trunk", commits["first"])
    run(root, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/trunk")
    assert git.main_branch(root) == "origin/HEAD"


def test_no_main_branch(repo: tuple[Path, dict[str, str]]) -> None:
    root, commits = repo
    run(root, "branch", "-q", "-m", "main", "trunk")
    assert git.main_branch(root) is None
    assert git.default_base(root) == commits["second"]  # HEAD itself


def test_merge_base_and_default_base(repo: tuple[Path, dict[str, str]]) -> None:
    root, commits = repo
    assert git.merge_base(root, "main", "feature") == commits["first"]
    assert git.default_base(root) == commits["first"]  # where feature forked from main
    run(root, "checkout", "-q", "main")
    assert git.default_base(root) == commits["first"]  # on the main branch: HEAD


def test_merge_base_of_an_unknown_revision(repo: tuple[Path, dict[str, str]]) -> None:
    root, _ = repo
    with pytest.raises(UsageError, match=r"^git merge-base main mian: "):
        git.merge_base(root, "main", "mian")


def test_default_base_before_the_first_commit(tmp_path: Path) -> None:
    run(tmp_path, "init", "-q", "-b", "main")
    with pytest.raises(UsageError, match=r"no commit yet, so nothing to compare with"):
        git.default_base(tmp_path)


# --- files at a revision ---------------------------------------------------------------------

RECORDS_AT_FIRST = ["records/a.yaml", "records/plans/p.yaml", "records/\u00fc b.yaml"]


@pytest.mark.parametrize(
    ("rev", "folder", "names"),
    [
        ("main", "records", RECORDS_AT_FIRST),
        ("feature", "records", sorted([*RECORDS_AT_FIRST, "records/b.yaml"])),
        ("main", "records/plans", ["records/plans/p.yaml"]),
        ("main", "notes", ["notes/x.txt"]),
        ("main", "missing", []),
    ],
)
def test_files_at_a_revision(
    repo: tuple[Path, dict[str, str]], rev: str, folder: str, names: list[str]
) -> None:
    root, _ = repo
    assert git.files_at(root, rev, folder) == names
    blobs = git.blobs_at(root, rev, folder)
    assert sorted(blobs) == names
    for name, blob in blobs.items():  # the ids git gives the files' bytes
        assert blob == git.blob_id(git.show(root, rev, name) or b"")


@pytest.mark.parametrize(
    ("rev", "path", "content"),
    [
        ("main", "records/a.yaml", b"id: a\n"),
        ("feature", "records/a.yaml", b"id: a\ntitle: changed\n"),
        ("main", "records/\u00fc b.yaml", b"id: u\n"),
        ("main", "records/b.yaml", None),  # not there yet
    ],
)
def test_show_a_file_at_a_revision(
    repo: tuple[Path, dict[str, str]], rev: str, path: str, content: bytes | None
) -> None:
    root, _ = repo
    assert git.show(root, rev, path) == content


def test_blob_id_is_git_hash_object(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"id: a\n")
    assert git.blob_id(b"id: a\n") == run(tmp_path, "hash-object", "f")


@pytest.mark.parametrize(
    ("only", "written"),
    [
        (None, sorted([*RECORDS_AT_FIRST, "records/b.yaml"])),
        (["records/b.yaml", "records/gone.yaml", "notes/x.txt"], ["records/b.yaml"]),
        ([], []),
    ],
)
def test_export_writes_a_folder_as_it_was(
    repo: tuple[Path, dict[str, str]], tmp_path: Path, only: list[str] | None, written: list[str]
) -> None:
    root, _ = repo
    dest = tmp_path / "export"
    assert git.export(root, "feature", "records", dest, only) == dest / "records"
    found = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert found == written
    for name in written:
        assert (dest / name).read_bytes() == git.show(root, "feature", name)


def test_changed_files_against_the_working_tree(repo: tuple[Path, dict[str, str]]) -> None:
    root, commits = repo
    (root / ".gitignore").write_text("records/ignored.yaml\n")
    write(
        root,
        {
            "records/plans/p.yaml": b"id: p\nedited: true\n",  # tracked, modified
            "records/new \u00e9.yaml": b"id: new\n",  # untracked
            "records/ignored.yaml": b"id: ignored\n",  # ignored, still part of the base
            "notes/x.txt": b"edited outside records/\n",
        },
    )
    (root / "records" / "a.yaml").unlink()  # tracked, deleted
    assert git.changed_files(root, commits["second"], "records") == [
        "records/a.yaml",
        "records/ignored.yaml",
        "records/new \u00e9.yaml",
        "records/plans/p.yaml",
    ]
    # against main, the branch's own commit counts too
    assert "records/b.yaml" in git.changed_files(root, "main", "records")
