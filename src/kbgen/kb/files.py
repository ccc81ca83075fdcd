"""The file-system edge: atomic writes, free names, finding files, stat fingerprints, JSON reads.

No YAML here, and nothing heavy imported: `kbgen render`'s no-op check runs on this module
alone. Writes are atomic — a temporary file beside the target, fsync, rename — so a crash leaves
the old file or the new one, never a torn one; `write_if_changed` leaves a file that already
holds the bytes untouched, mtime included.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kbgen.errors import Conflict, InvalidInput, Problem, StoreError


def write_atomic(path: Path, content: bytes, *, replace: bool = True, durable: bool = True) -> None:
    """Put `content` at `path` so that readers see the old bytes or the new, never a mix.

    With `replace=False` the file must not exist yet; a concurrent creator wins and this raises
    Conflict (the new name is linked, not renamed, so it cannot clobber). `durable=False` skips
    the fsyncs — still atomic for readers, but a power cut may lose the write: for files that
    are regenerated anyway (rendered pages), where fsync would cost most of the time.
    """
    try:
        try:
            fd, tmp = _temporary_beside(path)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = _temporary_beside(path)
    except OSError as exc:
        raise StoreError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError as exc:
                raise Conflict(f"{path}: already exists; not overwriting") from exc
        if durable:
            _fsync_dir(path.parent)
    except OSError as exc:
        raise StoreError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def holds(path: Path, content: bytes) -> bool:
    """Whether the file at `path` holds exactly `content` (False when it cannot be read)."""
    try:
        return path.read_bytes() == content
    except OSError:
        return False


def write_if_changed(path: Path, content: bytes, *, durable: bool = True) -> bool:
    """`write_atomic` unless the file already holds `content`; whether it wrote."""
    if holds(path, content):
        return False
    write_atomic(path, content, durable=durable)
    return True


def ends_a_line(path: Path) -> bool:
    """Whether the file is empty, missing, or its last byte ends a line: whether an append
    (of samples, of a server's log) starts a line of its own."""
    if not path.exists():
        return True
    with path.open("rb") as file:
        if file.seek(0, os.SEEK_END) == 0:
            return True
        file.seek(-1, os.SEEK_END)
        return file.read(1) == b"\n"


def numbered() -> Iterator[str]:
    """`-2`, `-3`, ...: the suffixes of a second, third, ... file of the same name."""
    return (f"-{n}" for n in itertools.count(2))


def free_path(
    folder: Path, stem: str, extension: str = "", suffixes: Iterable[str] | None = None
) -> Path:
    """`folder/stem+extension`, or when that exists the first free name with one of `suffixes`
    (by default `numbered`).

    Free when looked at: a writer that must not clobber a racing one still creates the file
    exclusively (`write_atomic(..., replace=False)`, `mkdir`).
    """
    for suffix in itertools.chain([""], numbered() if suffixes is None else suffixes):
        path = folder / f"{stem}{suffix}{extension}"
        if not path.exists():
            return path
    raise StoreError(f"{folder}: no free name for {stem}{extension}")


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`; InvalidInput located at the fault otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InvalidInput([Problem(path, None, "", "no such file")]) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput([Problem(path, None, "", f"cannot read: {exc}")]) from exc
    except json.JSONDecodeError as exc:
        raise InvalidInput([Problem(path, exc.lineno, "", f"not JSON: {exc.msg}")]) from exc
    if not isinstance(data, dict):
        raise InvalidInput([Problem(path, 1, "", "expected a JSON object")])
    return data


_COUNTER = itertools.count()


def _temporary_beside(path: Path) -> tuple[int, str]:
    """A new, empty, hidden file next to `path`, readable as any file (the umask applies).

    Named by process and counter, created exclusively: a leftover of a crashed writer with the
    same name is skipped, never reused. Cheaper than `tempfile.mkstemp` (no random names, no
    chmod), which matters when ten thousand pages are written.
    """
    folder, name = os.path.split(os.fspath(path))
    while True:
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.{next(_COUNTER)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


Fingerprint = list[int]  # size, mtime in ns, inode: see `fingerprint`


class FingerprintCache:
    """JSON values remembered per file, each returned while the file keeps its fingerprint.

    One JSON file, written atomically by `save`; `key` names the rules the values were computed
    under, and a cache written under other rules is ignored. A missing or unreadable cache is
    empty. What a value is, and what else must hold before it is used, is its user's contract.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path, self.key, self.changed = path, key, False
        self.entries: dict[str, list[Any]] = {}  # absolute path -> [fingerprint, value]
        try:
            content = json.loads(path.read_bytes())
            if content.get("key") == key:
                self.entries = content["entries"]
        except (OSError, ValueError, AttributeError, KeyError):
            pass

    def get(self, path: Path, fingerprint: Fingerprint) -> Any | None:
        """The value put for `path` when it had this fingerprint; None otherwise."""
        entry = self.entries.get(str(path.absolute()))
        return entry[1] if entry is not None and entry[0] == fingerprint else None

    def put(self, path: Path, fingerprint: Fingerprint, value: Any) -> None:
        """Remember `value` (JSON data) for `path`, fingerprinted before it was read."""
        self.entries[str(path.absolute())] = [fingerprint, value]
        self.changed = True

    def save(self) -> None:
        if self.changed:
            body = json.dumps({"key": self.key, "entries": self.entries}, separators=(",", ":"))
            write_atomic(self.path, body.encode())
            self.changed = False


def fingerprint(path: Path) -> Fingerprint:
    """Size, mtime and inode: take it *before* reading the file, so a write racing the read
    leaves a fingerprint that no longer matches."""
    stat = os.stat(path)
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


def iter_yaml_files(paths: Iterable[Path]) -> list[Path]:
    """Every `.yaml`/`.yml` file named or below the named folders, sorted.

    Hidden files and folders (a leftover `.x.yaml.tmp`, `.git`) are skipped below a folder.
    """
    found: set[str] = set()
    for path in paths:
        if not path.is_dir():
            found.add(str(path))
            continue
        for folder, subfolders, names in os.walk(path):
            subfolders[:] = [d for d in subfolders if not d.startswith(".")]
            found.update(
                os.path.join(folder, name)
                for name in names
                if name.endswith((".yaml", ".yml")) and not name.startswith(".")
            )
    return [Path(name) for name in sorted(found)]  # strings sort far faster than paths
