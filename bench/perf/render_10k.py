"""Time `kbgen render` over 10,000 synthetic records (issue 5's targets: < 5 s cold, < 0.5 s no-op).

Usage: python bench/perf/render_10k.py [N] [DIR]

Prints the wall time of the real command (a subprocess, start-up included): cold (empty docs/,
no cache), no-op (nothing changed since), and after one record changed. The knowledge base is
made in a temporary folder under DIR (default: the system's), so the same run can be timed on
a disk and on a memory file system (/dev/shm): creating 10,000 files is I/O-bound on a slow
disk, and the two figures tell the program's cost from the disk's.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))

from validate_10k import make_kb, timed  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    where = sys.argv[2] if len(sys.argv) > 2 else None
    kbgen = str(Path(sys.executable).with_name("kbgen"))
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        root = Path(tmp)
        make_kb(root / "records", n)
        os.sync()  # the setup's own writes are flushed before any timing
        command = [kbgen, "render", "--records", "records", "--docs", "docs"]
        cold = timed(command, root)
        pages = sum(1 for _ in (root / "docs").rglob("*.md"))
        noop = [timed(command, root) for _ in range(3)]
        one = next((root / "records").glob("2026-*.yaml"))
        one.write_text(one.read_text().replace("Why we ran it.", "Why we ran it, again."))
        changed = timed(command, root)
        print(f"{n} records -> {pages} pages, {os.cpu_count()} CPUs, in {tmp}")
        print(f"kbgen render, cold (empty docs/, no cache): {cold:.2f} s")
        print(
            f"kbgen render, nothing changed: best {min(noop):.2f} s of "
            f"{', '.join(f'{t:.2f}' for t in noop)}"
        )
        print(f"kbgen render, one record changed: {changed:.2f} s")


if __name__ == "__main__":
    main()
