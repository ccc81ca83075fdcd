"""The git edge: the only module that runs git.

A revision's files are exported into a temporary folder and loaded like any other; no command
line grows with the knowledge base (docs/design.md, "Revisions").
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable
from pathlib import Path

from kbgen.errors import UsageError

MAIN_BRANCHES = ("origin/HEAD", "origin/main", "origin/master", "main", "master")


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    command = ["git", "--literal-pathspecs", *args]
    try:
        done = subprocess.run(command, cwd=cwd, input=stdin, capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise UsageError("git is not installed; kbgen diff needs it") from exc
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"git {' '.join(args)}: {message[-1] if message else 'failed'}")
    return done.stdout


def toplevel(path: Path) -> Path:
    """The root of the git work tree holding `path`; UsageError outside one."""
    folder = path if path.is_dir() else path.parent
    try:
        return Path(_git(folder.absolute(), "rev-parse", "--show-toplevel").decode().strip())
    except UsageError as exc:
        raise UsageError(f"{path}: not inside a git repository") from exc


def commit_of(root: Path, rev: str) -> str:
    """The full commit id `rev` names; UsageError for an unknown revision."""
    try:
        return _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except UsageError as exc:
        raise UsageError(f"unknown git revision {rev!r}") from exc


def relative(root: Path, path: Path) -> str:
    """`path` relative to the repository root, as git names it (the folder's symbolic links
    resolved first); UsageError for a path outside the repository."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError as exc:
        raise UsageError(f"{path}: not inside the git repository {root}") from exc


def head_sha(folder: Path) -> str | None:
    """The commit checked out where `folder` is, or None outside a repository (or without git)."""
    try:
        return _git(folder.absolute(), "rev-parse", "HEAD").decode().strip()
    except UsageError:
        return None


def has_changes(folder: Path, only_inside: bool = False) -> bool | None:
    """Whether the work tree where `folder` is differs from its commit (tracked or untracked
    files that are not ignored), or with `only_inside` just the files under `folder`; None
    outside a repository (or without git)."""
    inside = ["--", "."] if only_inside else []
    try:
        return bool(_git(folder.absolute(), "status", "--porcelain", *inside).strip())
    except UsageError:
        return None


def checkout_of(path: Path) -> Path | None:
    """The root of the git work tree whose commit holds the file `path` (tracked there, not
    merely inside: a package installed under an ignored `.venv/` of some repository is not
    that repository's); None otherwise, or without git."""
    try:
        root = toplevel(path.parent)
        if not _git(root, "ls-files", "-z", "--", relative(root, path)):
            return None
    except UsageError:
        return None
    return root


def main_branch(root: Path) -> str | None:
    """The first of origin/HEAD, origin/main, origin/master, main, master that exists."""
    for name in MAIN_BRANCHES:
        try:
            commit_of(root, name)
        except UsageError:
            continue
        return name
    return None


def merge_base(root: Path, a: str, b: str) -> str:
    return _git(root, "merge-base", a, b).decode().strip()


def default_base(root: Path) -> str:
    """Where the current branch forked from the main branch (HEAD itself on the main branch)."""
    try:
        commit_of(root, "HEAD")
    except UsageError as exc:
        raise UsageError(f"{root}: no commit yet, so nothing to compare with") from exc
    main = main_branch(root)
    return merge_base(root, main, "HEAD") if main is not None else commit_of(root, "HEAD")


def export(
    root: Path, rev: str, folder: str, dest: Path, only: Iterable[str] | None = None
) -> Path:
    """`folder` (relative to the repository root) as it was at `rev`, written under `dest`.

    With `only`, just those of its files (repository-relative paths; those missing at `rev`
    are ignored). Only regular files are written (a symbolic link is not followed out).
    Returns the exported folder, empty when it did not exist at that revision.
    """
    target = dest / folder
    target.mkdir(parents=True, exist_ok=True)
    blobs = blobs_at(root, rev, folder)
    names = sorted(blobs if only is None else blobs.keys() & set(only))
    request = b"".join(blobs[name].encode() + b"\n" for name in names)
    out = _git(root, "cat-file", "--batch", stdin=request)
    at = 0
    for name in names:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        content = out[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1  # the content, then a newline
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return target


def blobs_at(root: Path, rev: str, folder: str) -> dict[str, str]:
    """The regular files under `folder` at `rev` (repository-relative) with their blob ids."""
    listed = _git(root, "ls-tree", "-r", "-z", "--full-tree", commit_of(root, rev), "--", folder)
    blobs = {}
    for entry in listed.decode().split("\0"):
        if not entry:
            continue
        meta, name = entry.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind == "blob" and mode in ("100644", "100755") and ".." not in name.split("/"):
            blobs[name] = blob
    return blobs


def blob_id(content: bytes) -> str:
    """The id git gives a file with these bytes (so a file on disk can be matched without git)."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content, usedforsecurity=False).hexdigest()


def short(root: Path, rev: str) -> str:
    return _git(root, "rev-parse", "--short", commit_of(root, rev)).decode().strip()


def files_at(root: Path, rev: str, folder: str) -> list[str]:
    """Paths of the regular files under `folder` at `rev`, relative to the repository root."""
    return sorted(blobs_at(root, rev, folder))


def show(root: Path, rev: str, path: str) -> bytes | None:
    """A file's bytes at `rev`, or None when it did not exist there."""
    try:
        return _git(root, "show", f"{commit_of(root, rev)}:{path}")
    except UsageError:
        return None


def changed_files(root: Path, rev: str, folder: str) -> list[str]:
    """Files under `folder` that differ between `rev` and the working tree, untracked and ignored
    ones included (repository-relative)."""
    tracked = _git(
        root, "diff", "--name-only", "-z", "--no-renames", commit_of(root, rev), "--", folder
    )
    untracked = _git(root, "ls-files", "-z", "--others", "--", folder)
    names = [*tracked.decode().split("\0"), *untracked.decode().split("\0")]
    return sorted({name for name in names if name})
