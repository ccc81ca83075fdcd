"""What a run measures on, found as it starts: the machine, the server's software, suite and code.

Each probe is a bounded subprocess whose failure is an unknown, never an error; the parsers are
pure functions of the probes' output (docs/design.md, "What a run measured on").
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kbgen
from kbgen import __version__, redact
from kbgen.bench.launch import resolve
from kbgen.errors import KbgenError, Mismatch, UsageError
from kbgen.kb import files, git
from kbgen.kb.models import Draft, Hardware, KbgenBuild, Software, Variant
from kbgen.run import prompts, traffic
from kbgen.run.design import windows
from kbgen.run.models import FORMAT, RunMeta
from kbgen.run.spec import ExperimentSpec, ProcessServer, Server

GPU_QUERY = [
    "nvidia-smi",
    "--query-gpu=index,uuid,name,memory.total,driver_version",
    "--format=csv,noheader,nounits",
]
CUDA_VISIBLE = "CUDA_VISIBLE_DEVICES"  # which GPUs CUDA shows a process; nvidia-smi shows all
PROBE_TIMEOUT_S = 60.0  # importing torch takes seconds; a server's Python that hangs does not
# run in the server's environment: its Python's version, and torch's with the CUDA it was built
# for (None on a CPU build), as the last line of its output
TORCH_PROBE = (
    "import json, platform\n"
    "try:\n"
    "    import torch\n"
    "    found = [torch.__version__, torch.version.cuda]\n"
    "except Exception:\n"
    "    found = [None, None]\n"
    "print(json.dumps([platform.python_version(), *found]))\n"
)
_PYTHON = re.compile(r"python[0-9.]*")
PACKAGE = Path(kbgen.__file__).parent  # the kbgen whose code is running, wherever it came from


def now() -> str:
    """The time now, as run.json keeps it (UTC, ISO 8601, to the second)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_meta(spec: ExperimentSpec, spec_path: Path | None = None) -> RunMeta:
    """run.json of a new run: nothing measured yet, the order it will run in, and what it runs
    on (the machine only when kbgen starts the server on it) and with which code:
    kbgen's own commit, and the spec's. `spec_path`: the spec's file, whose repository names
    the spec's commit and the prompt suite's path (without one, the folder kbgen runs in)."""
    host = label(spec.host_label)
    hardware, driver = server_hardware(spec.server, host)
    w = spec.workload
    source = w.prompts or (w.trace.path if w.trace else None)
    named, digest = suite(spec.path(source), spec_path) if source else ("synthetic", None)
    return RunMeta(
        format=FORMAT,
        spec_id=spec.id,
        status="running",
        started=now(),
        tool=f"kbgen {__version__}",
        kbgen=kbgen_build(),
        git_sha=git_sha(spec_path),
        git_changed=git_changed(spec_path),
        spec_in_kbgen_checkout=spec_in_kbgen_checkout(spec_path),
        hardware=hardware,
        software=software(spec, driver),
        host_label=host,
        prompt_suite=named,
        prompt_suite_sha256=digest,
        workdir=str(spec.folder),
        groups=_groups(spec),
        attempts=1,
        variants={},
        order=windows(spec),
        order_seed=spec.workload.order_seed,
    )


def _groups(spec: ExperimentSpec) -> dict[str, list[str | None]] | None:
    """Each prompt's group, the verdict's unit: its session, or as the suite says."""
    w = spec.workload
    if w.sessions is not None:
        return traffic.session_groups(traffic.suite(spec), w.sessions.turns)
    return prompts.groups(spec.path(w.prompts), w.classes, w.per_class) if w.prompts else None


def _output(command: list[str], env: Mapping[str, str] | None = None) -> str | None:
    """What `command` printed, or None when it is missing, fails or takes too long."""
    try:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=True,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
        ).stdout
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return None


def gpus(csv_text: str, visible: str | None = None) -> tuple[dict[str, Any], str | None]:
    """Hardware fields (accelerator, count, accelerator_memory_gib; devices, their indices, where
    `visible` chose them) and the driver version from nvidia-smi's
    `index,uuid,name,memory.total,driver_version` CSV (no header, no units: MiB), of the GPUs
    `visible` (a `CUDA_VISIBLE_DEVICES` value; None: all) leaves to CUDA.

    GPUs of several models are named together (`A + B`); the memory is the smallest GPU's, the
    one that bounds what fits on each.
    """
    rows = [[cell.strip() for cell in row] for row in csv.reader(csv_text.splitlines()) if row]
    rows = _visible([row for row in rows if len(row) == 5 and row[2]], visible)
    if not rows:
        return {}, None
    names = list(dict.fromkeys(row[2] for row in rows))
    found: dict[str, Any] = {"accelerator": " + ".join(names), "count": len(rows)}
    if visible is not None and all(row[0].isdigit() for row in rows):
        found["devices"] = [int(row[0]) for row in rows]
    memories = [row[3] for row in rows]
    if all(m.isdigit() for m in memories):  # "[N/A]" where the driver does not say
        found["accelerator_memory_gib"] = round(min(int(m) for m in memories) / 1024, 1)
    driver = rows[0][4] if rows[0][4] and not rows[0][4].startswith("[") else None
    return found, driver


def _visible(rows: list[list[str]], visible: str | None) -> list[list[str]]:
    """The rows (index, uuid, …) of the GPUs CUDA sees under `CUDA_VISIBLE_DEVICES=visible`:
    all when it is unset; else each entry in turn, an index or the start of one GPU's UUID
    (`GPU-…`, `MIG-…`), up to the first that names none (CUDA ignores the rest: "" or -1 hides
    every GPU)."""
    if visible is None:
        return rows
    seen: list[list[str]] = []
    for entry in (e.strip() for e in visible.split(",")):
        named = [r for r in rows if r[0] == entry or (len(entry) > 4 and r[1].startswith(entry))]
        if len(named) != 1 or named[0] in seen:
            break
        seen.append(named[0])
    return seen


def cpu() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what the platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def label(host_label: str | None) -> str | None:
    """A spec's host label as a record keeps it: masked if it looks like a secret."""
    return None if host_label is None else redact.text(host_label)


def local_hardware(
    host: str | None = None, env: Mapping[str, str] | None = None
) -> tuple[Hardware, str | None]:
    """The machine kbgen runs on, labelled `host` (its own name is never taken), with the GPUs
    a server in `env` (default: kbgen's own environment) sees, and the GPU driver's version."""
    found: dict[str, Any] = {"cpu": cpu(), "cpu_count": os.cpu_count()}
    if host is not None:
        found["host"] = host
    driver = None
    if shutil.which("nvidia-smi"):
        listed = _output(GPU_QUERY)
        if listed is not None:
            gpu, driver = gpus(listed, (os.environ if env is None else env).get(CUDA_VISIBLE))
            found |= gpu
    return Hardware(**found), driver


def server_hardware(server: Server, host: str | None = None) -> tuple[Hardware | None, str | None]:
    """`local_hardware` as a server kbgen starts here sees it (its spec's environment); None
    for a server kbgen reaches (another machine's, perhaps)."""
    if not isinstance(server, ProcessServer):
        return None, None
    return local_hardware(host, server_env(server))


def server_python(
    server: ProcessServer, env: Mapping[str, str], folder: Path | None = None
) -> str | None:
    """The Python that runs a `process` server: its command's first word when that is a Python
    (`python3`, `.venv/bin/python`), or the interpreter on the first line of the script it
    names (`vllm`, a console script); None otherwise (a wrapper, `uv run`, a container). A
    relative path is read from `folder`, where the server runs."""
    try:
        first = resolve(server.command[0], env)
    except UsageError:
        return None
    if "/" in first:
        first = str((folder or Path()) / first)
    found = shutil.which(first, path=env.get("PATH"))
    if found is None:
        return None
    if _PYTHON.fullmatch(Path(first).name):
        return found
    try:
        with open(found, "rb") as script:
            line = script.readline(512).decode(errors="replace")
    except OSError:
        return None
    words = line[2:].split() if line.startswith("#!") else []
    if words and Path(words[0]).name == "env" and len(words) > 1:
        words = [shutil.which(words[1], path=env.get("PATH")) or words[1], *words[2:]]
    if words and _PYTHON.fullmatch(Path(words[0]).name):
        return words[0]
    return None


def versions(probe_output: str) -> tuple[str | None, str | None, str | None]:
    """(Python, torch, CUDA) from TORCH_PROBE's output: its last line; Nones if it is not one."""
    lines = probe_output.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None, None, None
    if not (isinstance(found, list) and len(found) == 3):
        return None, None, None
    python, torch, cuda = (item if isinstance(item, str) and item else None for item in found)
    return python, torch, cuda


def server_env(server: ProcessServer) -> dict[str, str]:
    """The environment kbgen starts `server` in: the spec's `env` over kbgen's own (kbgen's
    alone where a `${VAR}` of it is unset: the launch will say so)."""
    try:
        return {**os.environ, **{k: resolve(v) for k, v in server.env.items()}}
    except UsageError:
        return dict(os.environ)


def software(spec: ExperimentSpec, driver: str | None = None) -> Software:
    """kbgen's version and the GPU driver's; for a `process` server, the Python, torch and CUDA
    of the environment it will run in (the spec's `env` over kbgen's own)."""
    found: dict[str, Any] = {"kbgen": __version__, "driver": driver}
    server = spec.server
    if isinstance(server, ProcessServer):
        env = server_env(server)
        python = server_python(server, env, spec.folder)
        printed = _output([python, "-c", TORCH_PROBE], env) if python else None
        if printed is not None:
            found["python"], found["torch"], found["cuda"] = versions(printed)
    return Software(**{k: v for k, v in found.items() if v is not None})


def draft(variant: Variant, earlier: Draft | None = None, folder: Path = Path()) -> Draft | None:
    """The draft model of `variant`'s own (an EAGLE-3 head, a small LM): its path and, where
    the path is here (a relative one read from `folder`, the spec's, where the server runs),
    the sha256 and size of its files (a folder's regular files: each one's name and sha256, in
    name order). None for a variant without one. Mismatch when `earlier`, what an earlier start
    of the run found, names other files: a run measures one draft."""
    model = getattr(variant.speculative_config, "model", None)
    if model is None:
        return None
    path, found = folder / model, list[Path]()
    if path.is_file():
        found = [path]
    elif path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file())
    stats = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in found)
    now = _draft(model, stats)
    if earlier is not None and earlier.sha256 != now.sha256:
        raise Mismatch(
            f"the draft model at {model} changed during the run (sha256 {earlier.sha256} when "
            f"first started, {now.sha256} now): a run measures one draft; start a new run"
        )
    return now


@functools.cache
def _draft(model: str, stats: tuple[tuple[str, int, int], ...]) -> Draft:
    """`model`'s Draft, from its files (`stats`: path, size and mtime of each, so a file
    rewritten in place is hashed again); once per such state and process."""
    files_ = [Path(name) for name, _, _ in stats]
    if not files_:
        return Draft(path=model)  # a hub name, not on this machine, or an empty folder
    if len(files_) == 1 and Path(model).is_file():
        digest = _sha256(files_[0])
    else:
        listing = "".join(f"{p.name}\0{_sha256(p)}\n" for p in files_)
        digest = hashlib.sha256(listing.encode()).hexdigest()
    return Draft(path=model, sha256=digest, bytes=sum(size for _, size, _ in stats))


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def suite(prompts_path: Path, spec_path: Path | None) -> tuple[str, str | None]:
    """The prompt suite as a record names it — its path relative to the top of the git work
    tree holding the spec (the spec's folder outside one; the file's name alone for a suite
    outside that folder) — and the sha256 of its bytes (None if it cannot be read)."""
    where = spec_path.parent if spec_path is not None else Path.cwd()
    try:
        root = git.toplevel(where)
    except UsageError:
        root = where
    try:
        name = prompts_path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        name = prompts_path.name
    try:
        digest: str | None = hashlib.sha256(
            files.read_regular(prompts_path, prompts.MAX_BYTES)
        ).hexdigest()
    except KbgenError:  # read a moment ago by check_inputs: gone or changed since
        digest = None
    return name, digest


def _spec_folder(spec_path: Path | None) -> Path:
    return spec_path.parent if spec_path is not None else Path.cwd()


def git_sha(spec_path: Path | None) -> str | None:
    """The commit checked out where the spec is (where kbgen runs, without a spec path); None
    outside a git repository. The spec's repository, not kbgen's (`kbgen_build`)."""
    return git.head_sha(_spec_folder(spec_path))


def git_changed(spec_path: Path | None) -> bool | None:
    """Whether that checkout had changes its commit does not hold; None outside git."""
    return git.has_changes(_spec_folder(spec_path))


def spec_in_kbgen_checkout(spec_path: Path | None, package: Path = PACKAGE) -> bool | None:
    """Whether the spec sits in the very work tree kbgen's code runs from (so `git_sha` and
    kbgen's commit are one commit); None when the spec is in no repository."""
    try:
        spec_root = git.toplevel(_spec_folder(spec_path))
    except UsageError:
        return None
    if git.head_sha(spec_root) is None:
        return None
    return git.checkout_of(package / "__init__.py") == spec_root


def kbgen_build(package: Path = PACKAGE, path: list[str] | None = None) -> KbgenBuild:
    """The kbgen whose code is running (`package`: the imported package's folder): its version
    and, where one can be known, its commit — that of the git checkout whose commit holds the
    package's files (with whether they differ from it), else the one the installed
    distribution's `direct_url.json` names (PEP 610: `pip install git+URL@REV`); else the
    version alone. `path`: where to look for the distribution (`sys.path`)."""
    root = git.checkout_of(package / "__init__.py")
    sha = git.head_sha(root) if root is not None else None
    if sha is not None:
        changed = git.has_changes(package, only_inside=True)
        known = {"changed": changed} if changed is not None else {}
        return KbgenBuild(version=__version__, commit=sha, commit_from="checkout", **known)
    commit = installed_commit(package, path)
    if commit is not None:
        return KbgenBuild(version=__version__, commit=commit, commit_from="direct_url")
    return KbgenBuild(version=__version__)


def installed_commit(package: Path, path: list[str] | None = None) -> str | None:
    """The VCS commit in `direct_url.json` of the installed kbgen distribution whose files are
    `package` (one installed elsewhere on the path names another kbgen's); None when there is
    none, it names no commit (a wheel from an index, a local folder) or cannot be read."""
    from importlib import metadata  # 80 ms: only when a run starts, never at import

    here = (package / "__init__.py").resolve()
    for dist in metadata.distributions(name="kbgen", path=sys.path if path is None else path):
        try:
            if Path(str(dist.locate_file("kbgen/__init__.py"))).resolve() != here:
                continue
            text = dist.read_text("direct_url.json")
            found = json.loads(text) if text else None
        except (OSError, ValueError):
            return None
        vcs = found.get("vcs_info") if isinstance(found, dict) else None
        commit = vcs.get("commit_id") if isinstance(vcs, dict) else None
        return commit if isinstance(commit, str) and commit else None
    return None
