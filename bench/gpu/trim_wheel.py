"""Remove files from a wheel, in place, and rewrite its RECORD to match.

    python3 trim_wheel.py WHEEL PREFIX...

Every member whose path starts with one of the PREFIXes is left out. Used by carry.sh to drop
the vLLM kernels a dense model on a Hopper GPU never loads, so the wheel fits fewer transfers.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile


def trim(wheel: str, prefixes: list[str]) -> tuple[int, int]:
    before = os.path.getsize(wheel)
    fd, scratch = tempfile.mkstemp(dir=os.path.dirname(wheel), suffix=".whl")
    os.close(fd)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(scratch, "w", zipfile.ZIP_DEFLATED) as dst:
        kept = [i for i in src.infolist() if not i.filename.startswith(tuple(prefixes))]
        names = {i.filename for i in kept}
        for info in kept:
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                paths = [(line, line.split(",", 1)[0]) for line in data.decode().splitlines()]
                data = "".join(
                    f"{line}\n"
                    for line, path in paths
                    if (line and path in names) or path.endswith("RECORD")
                ).encode()
            dst.writestr(info, data)
    os.replace(scratch, wheel)
    return before, os.path.getsize(wheel)


if __name__ == "__main__":
    old, new = trim(sys.argv[1], sys.argv[2:])
    print(f"{os.path.basename(sys.argv[1])}: {old / 1e6:.1f} MB -> {new / 1e6:.1f} MB")
