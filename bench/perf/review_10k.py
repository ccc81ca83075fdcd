"""Time `kbgen diff` and `kbgen check` on a git repository of 10,000 records as kbgen writes them.

Usage: python bench/perf/review_10k.py [N | --quick]

The repository's main branch holds N copies of the example's records (`kb_scale.make_kb`, with
their samples); a branch changes 10 of them and adds 10. Prints
the wall time of the real commands (subprocesses, start-up included): `kbgen diff` of the
branch against its fork point, in Markdown and JSON, and `kbgen check` cold (no cache) and
again (render cache filled).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))

from kb_scale import make_kb, run  # noqa: E402

GIT = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.org",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.org",
}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT}, check=True, capture_output=True
    )


def timed(command: list[str], cwd: Path) -> float:
    return run(command, cwd)[0]


def main() -> None:
    quick = sys.argv[1:] == ["--quick"]
    n = 30 if quick else int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    kbgen = str(Path(sys.executable).with_name("kbgen"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        records = root / "records"
        make_kb(records, n, "mixed")
        git(root, "init", "-q", "-b", "main")
        subprocess.run([kbgen, "render"], cwd=root, check=True, capture_output=True)
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "main")
        git(root, "checkout", "-q", "-b", "change")
        for path in sorted(records.glob("2026-*-copy-*.yaml"))[:10]:
            text = path.read_text()
            path.write_text(text.replace("title: ", "title: Again, ", 1))
            new = path.with_name(path.stem + "-rerun.yaml")
            new.write_text(text.replace(f"id: {path.stem}\n", f"id: {new.stem}\n", 1))
        subprocess.run([kbgen, "render"], cwd=root, check=True, capture_output=True)
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "change")
        print(f"{n} records on main, a branch changing 10 and adding 10, {os.cpu_count()} CPUs")
        print(f"kbgen diff (Markdown): {timed([kbgen, 'diff'], root):.2f} s")
        print(f"kbgen diff --format json: {timed([kbgen, 'diff', '--format', 'json'], root):.2f} s")
        subprocess.run(["rm", "-rf", str(root / ".kbgen_cache")], check=True)
        print(f"kbgen check, no cache: {timed([kbgen, 'check'], root):.2f} s")
        print(f"kbgen check, again: {timed([kbgen, 'check'], root):.2f} s")


if __name__ == "__main__":
    main()
