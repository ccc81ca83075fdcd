"""The file-system edge: bounded reads, atomic writes, locks, free names, file search, fingerprints.

No YAML here and nothing heavy imported: `kbgen render`'s no-op check runs on this module
alone. Why reads are bounded and writes atomic: docs/design.md, "Files".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import itertools
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kbgen.errors import Conflict, InvalidInput, KbgenError, Problem, StoreError, UsageError

MIB = 1024 * 1024
MAX_JSON_BYTES = 256 * MIB  # run.json, summary.json, other tools' result files
_PROC_FD = "/proc/self/fd"  # where Linux says which file a descriptor holds (race-free)


def read_regular(path: Path, limit: int, inside: Path | None = None) -> bytes:
    """The bytes of `path` if it is a regular file of at most `limit` bytes inside `inside`.

    `inside` (by default the folder `path` is named in) is the folder the file belongs to:
    a symlink is followed only to a file within it (a record linking to `/etc/passwd`, a
    samples path through a linked folder, are refused). Everything else — no such file, a
    dangling symlink, a folder, a FIFO, a device, a file over the limit — is one InvalidInput
    at the file, found without reading a byte and without blocking: the file is opened
    non-blocking and checked on the descriptor (fstat), so a swap after the check is caught.
    The disk refusing (permissions) is a StoreError.
    """
    folder = path.parent if inside is None else inside
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError) as exc:
        dangling = os.path.islink(path)
        raise _refused(path, "a dangling symlink" if dangling else "no such file") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refused(path, "a symlink loop") from exc
        if exc.errno == errno.ENXIO:  # what opening a socket says
            raise _refused(path, "a socket, not a regular file") from exc
        raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refused(path, f"{_kind_of(info.st_mode)}, not a regular file")
        if not _within(_opened(fd, path), _real(os.path.abspath(folder))):
            raise _refused(path, f"a symlink to a file outside {folder}; not read")
        if info.st_size > limit:
            raise _refused(path, f"too large ({info.st_size:,} bytes; the limit is {limit:,})")
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read(info.st_size + 1)  # the size it has, and one byte to see it grow
            if len(data) > info.st_size:  # growing as it is read: up to the limit
                data += file.read(limit + 1 - len(data))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if len(data) > limit:
        raise _refused(path, f"too large (over {limit:,} bytes, the limit)")
    return data


def _refused(path: Path, message: str) -> InvalidInput:
    return InvalidInput([Problem(path, None, "", message)])


def _kind_of(mode: int) -> str:
    kinds = [
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((what for test, what in kinds if test(mode)), "a special file")


def _opened(fd: int, path: Path) -> str:
    """The real path of the file open as `fd`: from the descriptor where the system tells it
    (Linux), else from the name, resolved (a symlink swapped meanwhile goes unseen there)."""
    try:
        return os.readlink(f"{_PROC_FD}/{fd}")
    except OSError:
        return os.path.realpath(path)


@functools.lru_cache(maxsize=64)
def _real(folder: str) -> str:
    """The folder's real path (half the cost of a read when there are thousands). Remembered:
    if the name is later made to lead elsewhere, the remembered place is the one it had when
    it was first trusted, so a stale answer can refuse a file but never admit one from outside
    it."""
    return os.path.realpath(folder)


def _within(real: str, folder: str) -> bool:
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` (flock on the folder itself: no lock file is left
    behind) while the block runs, creating the folder if need be: writers that check, then
    write several files in it (a record and its samples) take turns, so a loser sees the
    winner's files before it writes any. Advisory: only writers that take the lock are kept
    out."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise StoreError(f"{folder}: cannot lock: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


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
    """Whether `path` is a regular file holding exactly `content` (False when it cannot be
    read, or is anything else: a FIFO, a symlink out of its folder)."""
    try:
        return read_regular(path, len(content)) == content
    except KbgenError:
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
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refused(path, "not a regular file; not appended to")
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
        if not os.path.lexists(path):  # a dangling symlink takes its name too
            return path
    raise StoreError(f"{folder}: no free name for {stem}{extension}")


def read_json(
    path: Path, limit: int = MAX_JSON_BYTES, inside: Path | None = None
) -> dict[str, Any]:
    """A JSON object from `path` (read by `read_regular`); InvalidInput located at the fault
    otherwise."""
    raw = read_regular(path, limit, inside)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        message = f"not UTF-8 text (byte 0x{raw[exc.start]:02x})"
        raise InvalidInput([Problem(path, line, "", message)]) from exc
    except (ValueError, RecursionError) as exc:
        at = exc.lineno if isinstance(exc, json.JSONDecodeError) else None
        raise InvalidInput([Problem(path, at, "", f"not JSON: {json_fault(exc)}")]) from exc
    if not isinstance(data, dict):
        raise InvalidInput([Problem(path, 1, "", "expected a JSON object")])
    return data


def json_lines(path: Path, raw: bytes) -> tuple[list[tuple[int, Any]], list[Problem]]:
    """Each non-blank line of a JSONL file's bytes as JSON, with its number; and the problems of
    the lines that are not UTF-8 or not JSON, located in `path`."""
    found, problems = [], []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            message = f"not UTF-8 text (byte 0x{line[exc.start]:02x})"
            problems.append(Problem(path, number, "", message))
            continue
        if not text.strip():
            continue
        try:
            found.append((number, json.loads(text)))
        except (ValueError, RecursionError) as exc:
            problems.append(Problem(path, number, "", f"not JSON: {json_fault(exc)}"))
    return found, problems


def json_fault(exc: ValueError | RecursionError) -> str:
    """What `json.loads` found wrong, in words: its message, or why it gave up."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)  # e.g. an integer of more digits than Python converts


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


_TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.\d+\.tmp")


def abandoned(path: Path) -> bool:
    """Whether `path` is a temporary file of `write_atomic` whose writer is gone (killed before
    it renamed the file into place): safe to remove."""
    found = _TEMPORARY.fullmatch(path.name)
    if found is None or path.is_symlink() or not path.is_file():
        return False
    try:
        os.kill(int(found["pid"]), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False  # alive but not ours, or no such pid at all
    return False


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


Fingerprint = list[int]  # size, mtime in ns, inode: see `fingerprint`


MAX_CACHE_BYTES = 1024 * MIB  # a cache larger than this is ignored (and rewritten)


class FingerprintCache:
    """JSON values remembered per file, each returned while the file keeps its fingerprint.

    One JSON file, written atomically by `save`; `key` names the rules the values were computed
    under, and a cache written under other rules is ignored. A missing or unreadable cache is
    empty. What a value is, and what else must hold before it is used, is its user's contract.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path, self.key, self.changed = path, key, False
        self._cwd = os.getcwd()  # the entries' paths are absolute; `Path.absolute` is slow
        self.entries: dict[str, list[Any]] = {}  # absolute path -> [fingerprint, value]
        try:
            content = json.loads(read_regular(path, MAX_CACHE_BYTES))
            if content.get("key") == key:
                self.entries = content["entries"]
        except (KbgenError, ValueError, AttributeError, KeyError, RecursionError):
            pass

    def get(self, path: Path, fingerprint: Fingerprint) -> Any | None:
        """The value put for `path` when it had this fingerprint; None otherwise."""
        entry = self.entries.get(os.path.join(self._cwd, path))
        return entry[1] if fingerprint and entry is not None and entry[0] == fingerprint else None

    def put(self, path: Path, fingerprint: Fingerprint, value: Any) -> None:
        """Remember `value` (JSON data) for `path`, fingerprinted before it was read."""
        self.entries[os.path.join(self._cwd, path)] = [fingerprint, value]
        self.changed = True

    def save(self) -> None:
        if self.changed:
            body = json.dumps({"key": self.key, "entries": self.entries}, separators=(",", ":"))
            write_atomic(self.path, body.encode())
            self.changed = False


def fingerprint(path: Path) -> Fingerprint:
    """Size, mtime and inode: take it *before* reading the file, so a write racing the read
    leaves a fingerprint that no longer matches. A symlink that leads nowhere has its own; a
    file that is gone has none (`[]`), which matches nothing remembered."""
    try:
        info = os.stat(path)
    except OSError:
        try:
            info = os.lstat(path)
        except OSError:
            return []
    return [info.st_size, info.st_mtime_ns, info.st_ino]


RECORDS = "records"  # the knowledge base's folder, where every command looks by default
PLANS_FOLDER = "plans"  # inside it: every file there is a plan


def existing_records(records: Path) -> Path:
    """`records`, if it is a folder; UsageError otherwise (what `find_records` gives when it
    finds no knowledge base)."""
    if not records.is_dir():
        where = "no records/ folder of YAML in this folder or above it in its repository"
        raise UsageError(f"no knowledge base here: {where}; give --records DIR")
    return records


def find_records() -> Path:
    """The knowledge base a command run in the current folder works on, by default.

    The nearest `records/` folder that holds YAML files or a `plans/` folder, in the current
    folder or a folder above it up to the top of its git repository; else the `records/`
    folder at that top, or outside a repository the current folder's (either may not exist
    yet: a writer creates it). A `records/` without YAML is passed over: `docs/records/`, the
    rendered pages, is no knowledge base. Relative to the current folder (`../records`), as
    the user would name it, so that messages name its files so too.
    """
    here = Path(os.getcwd())
    chain = [here, *here.parents]
    top = next((i for i, folder in enumerate(chain) if os.path.lexists(folder / ".git")), 0)
    up = next(
        (i for i, folder in enumerate(chain[: top + 1]) if _holds_documents(folder / RECORDS)),
        top,
    )
    return Path(*[os.pardir] * up, RECORDS)


def _holds_documents(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return any(
                e.name.endswith((".yaml", ".yml")) or (e.name == PLANS_FOLDER and e.is_dir())
                for e in entries
            )
    except OSError:  # no such folder, not a folder, not readable
        return False


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
