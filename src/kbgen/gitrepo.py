"""The git edge: the only module that runs git.

`kbgen diff` and `kbgen check` compare the knowledge base at two revisions. A revision's
`records/` folder is exported into a temporary folder (`git archive`) and loaded like any other,
so the comparison sees exactly what validation and rendering see.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from collections.abc import Iterable
from pathlib import Path

from kbgen.errors import UsageError

MAIN_BRANCHES = ("origin/HEAD", "origin/main", "origin/master", "main", "master")


def _git(cwd: Path, *args: str) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
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
    are ignored). Returns the exported folder, empty when it did not exist at that revision.
    """
    target = dest / folder
    target.mkdir(parents=True, exist_ok=True)
    names = files_at(root, rev, folder)
    if only is not None:
        names = sorted(set(names) & set(only))
    if names:
        tar = _git(root, "archive", "--format=tar", commit_of(root, rev), "--", *names)
        try:
            with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
                archive.extractall(dest, filter="data")  # no links out, no absolute paths
        except tarfile.TarError as exc:
            raise UsageError(f"{folder} at {rev}: cannot be read safely: {exc}") from exc
    return target


def short(root: Path, rev: str) -> str:
    return _git(root, "rev-parse", "--short", commit_of(root, rev)).decode().strip()


def files_at(root: Path, rev: str, folder: str) -> list[str]:
    """Paths of the files under `folder` at `rev`, relative to the repository root."""
    listed = _git(root, "ls-tree", "-r", "--name-only", commit_of(root, rev), "--", folder)
    return listed.decode().splitlines()


def show(root: Path, rev: str, path: str) -> bytes | None:
    """A file's bytes at `rev`, or None when it did not exist there."""
    try:
        return _git(root, "show", f"{commit_of(root, rev)}:{path}")
    except UsageError:
        return None


def changed_files(root: Path, rev: str, folder: str, head: str | None = None) -> list[str]:
    """Files under `folder` that differ between `rev` and `head`, or the working tree (None;
    untracked files included)."""
    if head is not None:
        listed = _git(root, "diff", "--name-only", "--no-renames", rev, head, "--", folder)
        return sorted(listed.decode().splitlines())
    tracked = _git(root, "diff", "--name-only", "--no-renames", commit_of(root, rev), "--", folder)
    untracked = _git(root, "ls-files", "--others", "--", folder)  # ignored ones too: they count
    return sorted({*tracked.decode().splitlines(), *untracked.decode().splitlines()})
