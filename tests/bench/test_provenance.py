"""What a run measured on: GPUs from nvidia-smi, the server's Python, torch and CUDA, the prompt
suite's repository path and checksum, kbgen's own commit and the spec's — each probe against
recorded outputs (fake commands on PATH), real git repositories and installed distributions
laid out as pip leaves them, and none of them an error where the machine has nothing to say."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from kbgen import __version__
from kbgen.bench import provenance
from kbgen.errors import Mismatch
from kbgen.kb.models import Draft, KbgenBuild, Software, Variant
from kbgen.run.spec import ExperimentSpec, ExternalServer, ProcessServer
from tests.conftest import REPO
from tests.support.git import commit, git
from tests.support.specs import small_spec

# recorded on the H200 of the proof run (shared/GPU.md): one GPU, and its torch
# what the H200 of bench/gpu answered (nounits), its UUID made up: a machine's, never recorded
H200 = "0, GPU-5f1c9e2a-7b3d-4e8f-9a6b-2c4d8e0f1a3b, NVIDIA H200, 143771, 580.159.04\n"


def gpu_rows(*names: str) -> str:
    """nvidia-smi's answer for GPUs of these `name, memory, driver` cells, indexed in order."""
    return "".join(
        f"{i}, GPU-{i:08x}-0000-4000-8000-00000000000{i}, {n}\n" for i, n in enumerate(names)
    )


H200_ROW = "NVIDIA H200, 143771, 580.159.04"
H200_TORCH = '["3.12.3", "2.11.0+cu130", "13.0"]'


def fake(folder: Path, name: str, script: str) -> Path:
    """An executable `name` in `folder` running the shell `script`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holds only a folder of fakes (and what /bin/sh needs): no real nvidia-smi."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}/usr/bin{os.pathsep}/bin")
    if any(Path(p, "nvidia-smi").exists() for p in ("/usr/bin", "/bin")):
        pytest.fail("this machine has a real nvidia-smi in /usr/bin: the CPU case cannot be shown")
    return bin_


@pytest.mark.parametrize(
    ("csv_text", "hardware", "driver_version"),
    [
        (
            H200,
            {"accelerator": "NVIDIA H200", "count": 1, "accelerator_memory_gib": 140.4},
            "580.159.04",
        ),
        (
            gpu_rows(*[H200_ROW] * 8),
            {"accelerator": "NVIDIA H200", "count": 8, "accelerator_memory_gib": 140.4},
            "580.159.04",
        ),
        (
            gpu_rows(
                "NVIDIA H100 80GB HBM3, 81559, 550.54.15", "NVIDIA A100-SXM4-40GB, 40960, 550.54.15"
            ),
            {
                "accelerator": "NVIDIA H100 80GB HBM3 + NVIDIA A100-SXM4-40GB",
                "count": 2,
                "accelerator_memory_gib": 40.0,
            },
            "550.54.15",
        ),
        (
            gpu_rows("NVIDIA GH200 480GB, [N/A], [N/A]"),
            {"accelerator": "NVIDIA GH200 480GB", "count": 1},
            None,
        ),
        ("", {}, None),
        ("No devices were found\n", {}, None),
    ],
    ids=["h200", "eight", "mixed", "not-available", "empty", "no-devices"],
)
def test_nvidia_smi_csv_gives_the_gpus_their_memory_and_the_driver(
    csv_text: str, hardware: dict[str, object], driver_version: str | None
) -> None:
    assert provenance.gpus(csv_text) == (hardware, driver_version)


@pytest.mark.parametrize(
    ("visible", "devices", "names"),
    [
        (None, None, "NVIDIA H100 80GB HBM3 + NVIDIA A100-SXM4-40GB"),
        ("2", [2], "NVIDIA A100-SXM4-40GB"),
        ("1,0", [1, 0], "NVIDIA H100 80GB HBM3"),
        ("GPU-00000002", [2], "NVIDIA A100-SXM4-40GB"),  # the start of a UUID is enough
        ("0,7,2", [0], "NVIDIA H100 80GB HBM3"),  # CUDA stops at the first that names none
        ("GPU-0000", [], None),  # the start of several: none
        ("", [], None),
        ("-1", [], None),
    ],
)
def test_only_the_gpus_cuda_visible_devices_leaves_count(
    visible: str | None, devices: list[int] | None, names: str | None
) -> None:
    listed = gpu_rows(
        "NVIDIA H100 80GB HBM3, 81559, 550.54.15",
        "NVIDIA H100 80GB HBM3, 81559, 550.54.15",
        "NVIDIA A100-SXM4-40GB, 40960, 550.54.15",
    )
    found, driver_version = provenance.gpus(listed, visible)
    count = 3 if devices is None else len(devices)
    assert (found.get("count", 0), found.get("accelerator")) == (count, names)
    assert found.get("devices") == (devices or None)  # which of them, where the variable chose
    assert driver_version == ("550.54.15" if count else None)


def test_a_server_s_gpus_are_those_its_spec_s_environment_leaves(
    bare_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = gpu_rows(H200_ROW, H200_ROW)
    fake(bare_path, "nvidia-smi", f"[ \"$1\" = '{provenance.GPU_QUERY[1]}' ] && printf '{listed}'")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    server = ProcessServer(launcher="process", command=["vllm", "serve"], model="m")
    assert provenance.local_hardware()[0].count == 2
    assert getattr(provenance.server_hardware(server)[0], "count", None) == 2
    server = server.model_copy(update={"env": {"CUDA_VISIBLE_DEVICES": "1"}})
    hardware = provenance.server_hardware(server, "lab")[0]
    assert hardware is not None and (hardware.count, hardware.host) == (1, "lab")
    assert hardware.devices == [1]
    external = ExternalServer(launcher="external", url="http://127.0.0.1:8000")
    assert provenance.server_hardware(external) == (None, None)  # another machine's, perhaps


def test_the_gpus_of_a_gpu_machine(bare_path: Path) -> None:
    fake(bare_path, "nvidia-smi", f"[ \"$1\" = '{provenance.GPU_QUERY[1]}' ] && printf '{H200}'")
    hardware, driver_version = provenance.local_hardware("lab-h200")
    assert (hardware.accelerator, hardware.count) == ("NVIDIA H200", 1)
    assert hardware.accelerator_memory_gib == 140.4 and driver_version == "580.159.04"
    assert hardware.host == "lab-h200" and hardware.cpu and hardware.cpu_count


@pytest.mark.parametrize("script", [None, "echo 'NVIDIA-SMI has failed' >&2; exit 9"])
def test_a_cpu_machine_has_no_gpu_and_no_error(bare_path: Path, script: str | None) -> None:
    if script is not None:  # a driver that is installed but not loaded
        fake(bare_path, "nvidia-smi", script)
    hardware, driver_version = provenance.local_hardware()
    assert hardware.accelerator is None and hardware.count is None and driver_version is None
    assert hardware.host is None  # no label: no host, and never the machine's own name
    assert hardware.cpu and hardware.cpu_count


@pytest.mark.parametrize(
    ("label", "kept"),
    [("lab-h200-1", "lab-h200-1"), ("sk-proj-4f9Qm2LxT7vB1nK8rW3yZ6cD0eH5jA2s", "***")],
)
def test_a_host_label_is_kept_unless_it_looks_like_a_secret(label: str, kept: str) -> None:
    assert provenance.label(label) == kept
    assert provenance.label(None) is None


def _process(
    tmp_path: Path, command: list[str], env: dict[str, str] | None = None
) -> ExperimentSpec:
    server = {"launcher": "process", "command": command, "model": "m", "env": env or {}}
    return small_spec(tmp_path, server=server)


def test_the_server_s_python_torch_and_cuda(tmp_path: Path, bare_path: Path) -> None:
    # the server's env reaches the probe: the fake answers only with it
    python = fake(bare_path, "python3", f"[ \"$KBGEN_SITE\" = /tmp/site ] && echo '{H200_TORCH}'")
    spec = _process(tmp_path, [str(python), "-m", "vllm.entrypoints.cli.main", "serve"])
    spec_env = _process(tmp_path, [str(python), "-m", "vllm"], env={"KBGEN_SITE": "/tmp/site"})
    assert provenance.software(spec_env, "580.159.04") == Software(
        kbgen=__version__,
        python="3.12.3",
        torch="2.11.0+cu130",
        cuda="13.0",
        driver="580.159.04",
    )
    assert provenance.software(spec) == Software(kbgen=__version__)


def test_a_console_script_names_its_python(tmp_path: Path, bare_path: Path) -> None:
    python = fake(bare_path, "python3.12", f"echo '{H200_TORCH}'")
    vllm = bare_path / "vllm"
    vllm.write_text("#!/usr/bin/env python3.12\nfrom vllm.entrypoints.cli.main import main\n")
    vllm.chmod(0o755)
    spec = _process(tmp_path, ["vllm", "serve"])
    assert isinstance(spec.server, ProcessServer)
    assert provenance.server_python(spec.server, os.environ) == str(python)
    found = provenance.software(spec)
    assert (found.torch, found.cuda) == ("2.11.0+cu130", "13.0")


def test_a_python_without_torch(tmp_path: Path) -> None:
    """This test's own Python has no torch: its version, and torch and CUDA unknown."""
    with pytest.raises(ImportError):
        __import__("torch")
    found = provenance.software(_process(tmp_path, [sys.executable, "serve.py"]))
    assert found.python == ".".join(map(str, sys.version_info[:3]))
    assert found.torch is None and found.cuda is None


@pytest.mark.parametrize(
    "command",
    [["bash", "-c", "vllm serve"], ["/no/such/python3"], ["${KBGEN_UNSET_PYTHON}"]],
    ids=["wrapper", "missing", "unset-reference"],
)
def test_a_server_without_a_python_kbgen_can_name(tmp_path: Path, command: list[str]) -> None:
    assert provenance.software(_process(tmp_path, command)) == Software(kbgen=__version__)


def test_a_python_that_hangs_is_given_up(
    tmp_path: Path, bare_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provenance, "PROBE_TIMEOUT_S", 0.2)
    python = fake(bare_path, "python3", "exec sleep 30")
    found = provenance.software(_process(tmp_path, [str(python)]))
    assert found == Software(kbgen=__version__)


@pytest.mark.parametrize(
    ("printed", "found"),
    [
        (H200_TORCH, ("3.12.3", "2.11.0+cu130", "13.0")),
        ('a warning on stdout\n["3.11.9", "2.5.1+cpu", null]\n', ("3.11.9", "2.5.1+cpu", None)),
        ('["3.12.3", null, null]', ("3.12.3", None, None)),
        ("Traceback (most recent call last):", (None, None, None)),
        ('{"a": 1}', (None, None, None)),
        ("", (None, None, None)),
    ],
    ids=["h200", "cpu-torch", "no-torch", "not-json", "not-a-list", "nothing"],
)
def test_the_probe_s_output(printed: str, found: tuple[str | None, ...]) -> None:
    assert provenance.versions(printed) == found


def test_the_suite_in_a_repository_by_its_path_from_the_top(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "bench" / "prompts").mkdir(parents=True)
    (repo / "bench" / "experiments").mkdir()
    suite = repo / "bench" / "prompts" / "seed.jsonl"
    suite.write_text('{"class": "coding", "prompt": "p"}\n')
    spec = repo / "bench" / "experiments" / "x.yaml"
    spec.write_text("schema_version: 1\n")
    git(repo, "init", "-q")
    sha = commit(repo, "first")
    digest = hashlib.sha256(suite.read_bytes()).hexdigest()
    assert provenance.suite(suite, spec) == ("bench/prompts/seed.jsonl", digest)
    assert (provenance.git_sha(spec) or "").startswith(sha)


def test_the_suite_outside_git_by_its_path_from_the_spec(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    suite = tmp_path / "prompts" / "seed.jsonl"
    suite.write_text('{"class": "coding", "prompt": "p"}\n')
    spec = tmp_path / "x.yaml"
    elsewhere = tmp_path.parent / f"{tmp_path.name}-other.jsonl"
    elsewhere.write_bytes(suite.read_bytes())
    digest = hashlib.sha256(suite.read_bytes()).hexdigest()
    try:
        assert provenance.suite(suite, spec) == ("prompts/seed.jsonl", digest)
        # a suite outside the spec's folder: its name, never the machine's absolute path
        assert provenance.suite(elsewhere, spec) == (elsewhere.name, digest)
    finally:
        elsewhere.unlink()
    assert provenance.git_sha(spec) is None


def test_run_json_of_a_process_run_on_a_gpu_machine(tmp_path: Path, bare_path: Path) -> None:
    fake(bare_path, "nvidia-smi", f"printf '{H200}'")
    python = fake(bare_path, "python3", f"echo '{H200_TORCH}'")
    spec = small_spec(
        tmp_path, server={"launcher": "process", "command": [str(python)], "model": "m"}
    )
    spec.host_label = "lab-h200"
    meta = provenance.new_meta(spec, tmp_path / "spec.yaml")
    assert meta.hardware is not None and meta.hardware.accelerator_memory_gib == 140.4
    assert meta.software is not None and meta.software.driver == "580.159.04"
    assert (meta.software.torch, meta.software.cuda) == ("2.11.0+cu130", "13.0")
    assert (meta.host_label, meta.hardware.host) == ("lab-h200", "lab-h200")
    assert meta.prompt_suite == "prompts.jsonl" and meta.prompt_suite_sha256
    assert meta.git_sha is None


def test_run_json_of_an_external_server_names_no_hardware(tmp_path: Path, bare_path: Path) -> None:
    fake(bare_path, "nvidia-smi", f"printf '{H200}'")  # the server may be on another machine
    meta = provenance.new_meta(small_spec(tmp_path))
    assert meta.hardware is None and meta.software == Software(kbgen=__version__)


def test_a_work_tree_with_changes_its_commit_does_not_hold_is_said(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    spec = repo / "spec.yaml"
    spec.write_text("x: 1\n")
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "spec")
    assert provenance.git_changed(spec) is False
    spec.write_text("x: 2\n")  # what the GPU machine's copy was: files newer than the commit
    assert provenance.git_changed(spec) is True
    (tmp_path / "outside.yaml").write_text("x: 1\n")
    assert provenance.git_changed(tmp_path / "outside.yaml") is None


# --- the code that ran: kbgen's own commit, and the spec's -------------------------------------

VCS_SHA = "9f" * 20
EXAMPLE_SPEC = REPO / "bench" / "experiments" / "ngram-vs-baseline.yaml"


@pytest.fixture
def kbgen_under_test() -> KbgenBuild:
    """The kbgen these tests import is this checkout's `src/kbgen`: its HEAD, and whether the
    package's files differ from it (asked of git here, independently of kbgen)."""
    assert provenance.PACKAGE == REPO / "src" / "kbgen"
    return KbgenBuild(
        version=__version__,
        commit=git(REPO, "rev-parse", "HEAD"),
        commit_from="checkout",
        changed=bool(git(REPO, "status", "--porcelain", "--", "src/kbgen")),
    )


def _spec_in(where: str, tmp_path: Path) -> tuple[Path, str | None]:
    """A spec file `where` (outside git, in another repository, in kbgen's own checkout), and
    the commit its repository has checked out."""
    if where == "kbgen-checkout":
        return EXAMPLE_SPEC, git(REPO, "rev-parse", "HEAD")
    folder = tmp_path / "experiments"
    folder.mkdir()
    (folder / "spec.yaml").write_text("schema_version: 1\n")
    if where == "outside":
        return folder / "spec.yaml", None
    git(folder, "init", "-q")
    commit(folder, "the spec")
    return folder / "spec.yaml", git(folder, "rev-parse", "HEAD")


@pytest.mark.parametrize(
    ("where", "same_checkout"),
    [("outside", None), ("another-repository", False), ("kbgen-checkout", True)],
)
def test_kbgen_s_commit_is_its_own_wherever_the_spec_sits(
    tmp_path: Path, kbgen_under_test: KbgenBuild, where: str, same_checkout: bool | None
) -> None:
    spec_path, spec_sha = _spec_in(where, tmp_path)
    meta = provenance.new_meta(small_spec(tmp_path), spec_path)
    assert meta.kbgen == kbgen_under_test
    assert (meta.git_sha, meta.spec_in_kbgen_checkout) == (spec_sha, same_checkout)
    if where == "another-repository":
        assert meta.git_sha != kbgen_under_test.commit and meta.git_changed is False


def test_no_git_at_all_names_kbgen_s_version_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no git: even kbgen's own checkout says nothing
    meta = provenance.new_meta(small_spec(tmp_path), EXAMPLE_SPEC)
    assert meta.kbgen == KbgenBuild(version=__version__)
    assert (meta.git_sha, meta.git_changed, meta.spec_in_kbgen_checkout) == (None, None, None)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A clone of kbgen: its package under src/, committed, and a README beside it."""
    repo = tmp_path / "clone"
    (repo / "src" / "kbgen").mkdir(parents=True)
    (repo / "src" / "kbgen" / "__init__.py").write_text('__version__ = "0.1.0"\n')
    (repo / "README.md").write_text("kbgen\n")
    git(repo, "init", "-q")
    commit(repo, "kbgen")
    return repo


@pytest.mark.parametrize(
    ("edited", "changed"),
    [
        (None, False),
        ("src/kbgen/__init__.py", True),
        ("src/kbgen/new_module.py", True),  # untracked, and it runs
        ("README.md", False),  # the work tree changed, not the code that ran
    ],
    ids=["clean", "edited", "new-file", "outside-the-package"],
)
def test_a_checkout_names_its_commit_and_whether_the_package_changed(
    checkout: Path, edited: str | None, changed: bool
) -> None:
    if edited is not None:
        (checkout / edited).write_text("changed\n")
    found = provenance.kbgen_build(checkout / "src" / "kbgen", path=[])
    assert found == KbgenBuild(
        version=__version__,
        commit=git(checkout, "rev-parse", "HEAD"),
        commit_from="checkout",
        changed=changed,
    )


def installed(site: Path, direct_url: str | None) -> Path:
    """kbgen installed into `site` as pip leaves it: the package, and its dist-info with
    `direct_url` as direct_url.json (PEP 610; None: installed from an index, which writes none)."""
    (site / "kbgen").mkdir(parents=True)
    (site / "kbgen" / "__init__.py").write_text('__version__ = "0.1.0"\n')
    info = site / "kbgen-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kbgen\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(direct_url)
    return site / "kbgen"


GIT_URL = "https://github.com/example/kbgen.git"


@pytest.mark.parametrize(
    ("direct_url", "commit_id"),
    [
        (
            {"url": GIT_URL, "vcs_info": {"vcs": "git", "commit_id": VCS_SHA}},
            VCS_SHA,
        ),
        (
            {"url": GIT_URL, "vcs_info": {"vcs": "git", "requested_revision": "v0.1.0"}},
            None,
        ),
        ({"url": "file:///src/kbgen", "dir_info": {"editable": True}}, None),
        ({"url": "https://example.org/kbgen-0.1.0.tar.gz", "archive_info": {}}, None),
        ({"url": GIT_URL, "vcs_info": {"vcs": "git", "commit_id": 5}}, None),
        (None, None),
        ("{not json", None),
    ],
    ids=["vcs", "vcs-no-commit", "local-folder", "archive", "commit-not-text", "index", "torn"],
)
def test_an_installed_distribution_names_the_commit_its_direct_url_json_names(
    tmp_path: Path, direct_url: dict[str, object] | str | None, commit_id: str | None
) -> None:
    text = direct_url if isinstance(direct_url, str | None) else json.dumps(direct_url)
    package = installed(tmp_path / "site-packages", text)
    found = provenance.kbgen_build(package, path=[str(tmp_path / "site-packages")])
    if commit_id is None:
        assert found == KbgenBuild(version=__version__)
    else:
        assert found == KbgenBuild(version=__version__, commit=commit_id, commit_from="direct_url")


def test_another_kbgen_s_distribution_names_nothing_of_the_code_that_ran(tmp_path: Path) -> None:
    vcs = {"url": GIT_URL, "vcs_info": {"vcs": "git", "commit_id": VCS_SHA}}
    installed(tmp_path / "site-packages", json.dumps(vcs))
    (tmp_path / "elsewhere" / "kbgen").mkdir(parents=True)  # the kbgen imported: not that one
    (tmp_path / "elsewhere" / "kbgen" / "__init__.py").write_text("")
    found = provenance.kbgen_build(
        tmp_path / "elsewhere" / "kbgen", path=[str(tmp_path / "site-packages")]
    )
    assert found == KbgenBuild(version=__version__)


def test_a_distribution_in_some_repository_s_ignored_venv_is_not_its_checkout(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / ".gitignore").write_text(".venv/\n")
    git(repo, "init", "-q")
    commit(repo, "a project that installs kbgen into its .venv")
    site = repo / ".venv" / "lib" / "site-packages"
    vcs = {"url": GIT_URL, "vcs_info": {"vcs": "git", "commit_id": VCS_SHA}}
    package = installed(site, json.dumps(vcs))
    found = provenance.kbgen_build(package, path=[str(site)])
    assert found == KbgenBuild(version=__version__, commit=VCS_SHA, commit_from="direct_url")
    assert provenance.spec_in_kbgen_checkout(repo / "spec.yaml", package) is False


def test_another_work_tree_of_kbgen_s_repository_is_not_its_checkout(
    tmp_path: Path, checkout: Path
) -> None:
    """A spec in a second work tree of kbgen's repository names that tree's commit, not the
    code's: the same repository, another checkout."""
    package = checkout / "src" / "kbgen"
    git(checkout, "worktree", "add", "-q", "-b", "specs", str(tmp_path / "specs"))
    (tmp_path / "specs" / "spec.yaml").write_text("schema_version: 1\n")
    commit(tmp_path / "specs", "a spec on its own branch")
    assert provenance.spec_in_kbgen_checkout(checkout / "spec.yaml", package) is True
    assert provenance.spec_in_kbgen_checkout(tmp_path / "specs" / "spec.yaml", package) is False
    assert (
        provenance.git_sha(tmp_path / "specs" / "spec.yaml")
        != provenance.kbgen_build(package, path=[]).commit
    )


def test_a_draft_folder_is_named_by_its_files_checksums_and_a_hub_name_by_itself(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "draft"
    folder.mkdir()
    (folder / "config.json").write_text('{"speculators_model_type": "eagle3"}')
    (folder / "model.safetensors").write_bytes(b"\x00" * 1000)
    (folder / "sub").mkdir()  # not a file of the draft's: left out
    eagle3 = {"method": "eagle3", "num_speculative_tokens": 3}
    found = provenance.draft(Variant(speculative_config={**eagle3, "model": str(folder)}))
    listing = "".join(
        f"{p.name}\0{hashlib.sha256(p.read_bytes()).hexdigest()}\n"
        for p in sorted(folder.iterdir())
        if p.is_file()
    )
    assert found == Draft(
        path=str(folder), sha256=hashlib.sha256(listing.encode()).hexdigest(), bytes=1036
    )
    variant = Variant(speculative_config={**eagle3, "model": str(folder)})
    assert provenance.draft(variant, found) == found  # the same files: the same draft
    (folder / "model.safetensors").write_bytes(b"\x01" * 2000)  # rewritten where it was
    again = provenance.draft(variant)
    assert again is not None and again.sha256 != found.sha256 and again.bytes == 2036
    with pytest.raises(Mismatch, match="changed during the run"):
        provenance.draft(variant, found)
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = provenance.draft(Variant(speculative_config={**eagle3, "model": str(empty)}))
    assert nothing == Draft(path=str(empty))  # no files: no checksum that looks like one
    one = tmp_path / "draft.safetensors"
    one.write_bytes(b"weights")
    single = provenance.draft(Variant(speculative_config={**eagle3, "model": str(one)}))
    assert single == Draft(path=str(one), sha256=hashlib.sha256(b"weights").hexdigest(), bytes=7)
    hub = provenance.draft(Variant(speculative_config={**eagle3, "model": "org/eagle3-head"}))
    assert hub == Draft(path="org/eagle3-head")
    ngram = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    assert provenance.draft(Variant(speculative_config=ngram)) is None
    assert provenance.draft(Variant()) is None
