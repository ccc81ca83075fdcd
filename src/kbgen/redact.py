"""Keep secrets out of everything kbgen writes: run folders, records, logs of commands.

A value is secret when its option or variable name says so (api key, token, password, secret,
credentials), or when it looks like a bearer token. Redaction replaces the value, keeps the name,
so a reader still sees that a key was set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MASK = "***"
# "token" only as a word: --hf-token and HF_TOKEN are secrets, --max-num-batched-tokens and
# --tokenizer are not.
_SECRET_NAME = re.compile(
    r"(api[-_]?key|(?<![a-z])token(?![a-z])|passw(or)?d|secret|credential|authorization)", re.I
)
_SECRET_VALUE = re.compile(r"(Bearer\s+)\S+|sk-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{8,}")


def _mask_values(value: str) -> str:
    """Token-shaped parts of a value masked; a `Bearer ` prefix is kept."""
    return _SECRET_VALUE.sub(lambda m: (m.group(1) or "") + MASK, value)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def args(argv: list[str]) -> list[str]:
    """Command-line arguments with the values of secret options masked.

    Handles `--api-key X`, `--api-key=X`, `HF_TOKEN=X` (an environment prefix or `-e` of a
    container), and token-shaped values anywhere (`sk-…`, `hf_…`, `Bearer …` in a header).
    """
    out: list[str] = []
    mask_next = False
    for arg in argv:
        name = arg.split("=", 1)[0]
        if mask_next:
            out.append(MASK)
            mask_next = False
        elif "=" in arg and is_secret_name(name):
            out.append(f"{name}={MASK}")
        elif arg.startswith("-") and is_secret_name(arg):
            out.append(arg)
            mask_next = True
        else:
            out.append(_mask_values(arg))
    return out


def env(variables: Mapping[str, str]) -> dict[str, str]:
    """Environment variables with the values of secret ones masked."""
    return {
        name: MASK if is_secret_name(name) else _mask_values(value)
        for name, value in variables.items()
    }
