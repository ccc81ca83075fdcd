"""Property-test helpers: hostile values, mutations of JSON-like trees, a deadline per example,
and the check that a failure reads as kbgen's own located lines, never as a traceback.

Every property test runs with `SETTINGS` (seeded, so a failure reproduces; no per-example
deadline from hypothesis, whose timing is noisy on a shared machine — `deadline` is a hard
limit instead, for hangs).
"""

from __future__ import annotations

import copy
import math
import os
import re
from pathlib import Path
from typing import Any

from click.testing import Result
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kbgen.cli import exit_code
from kbgen.errors import InvalidInput, KbgenError
from tests.support.special import deadline as deadline  # the one deadline of every test

# The fast lane (`make test-fast`, KBGEN_FAST=1) tries a fifth of each property's examples, at
# least 20; `make test` tries them all
FAST = bool(os.environ.get("KBGEN_FAST"))


def examples(n: int) -> int:
    """A property's examples: `n`, or a fifth of it in the fast lane."""
    return max(20, n // 5) if FAST else n


SETTINGS = settings(
    derandomize=True,
    max_examples=examples(250),
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # the autouse chdir: harmless across examples
    ],
)

# Scalars a hostile file holds where a number, a string or a flag belongs.
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63 - 2, max_value=2**64 + 2),
    st.floats(),  # NaN and ±inf included
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 1e308, 5e-324, 10**30]),
    st.text(max_size=12),
    st.sampled_from(["", "1", "12", "true", ".nan", ".inf", "1e400", "0x10", "-1", "NaN"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=10,
)


# `[[[…]]]`, thousands of lists deep: what overflows a recursive parser or validator. In the
# tree it is a marker string (a tree that deep cannot be dumped, nor printed by hypothesis);
# `deep_text` writes it out in the serialised text.
DEEP = st.integers(min_value=150, max_value=3000).map(lambda depth: f"KBGEN-DEEP-{depth}")
HOSTILE = st.one_of(VALUES, DEEP)


def deep_text(text: str) -> str:
    """`text` (YAML or JSON) with each DEEP marker, quoted or not, written out as nested lists."""
    return re.sub(
        r"""(["']?)KBGEN-DEEP-(\d+)\1""", lambda m: "[" * int(m[2]) + "]" * int(m[2]), text
    )


Path_ = tuple[str | int, ...]


def paths_of(tree: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every path to a node below the root of a tree of dicts and lists, depth first."""
    found: list[Path_] = []
    children = tree.items() if isinstance(tree, dict) else enumerate(tree)
    for key, child in children:
        found.append((*prefix, key))
        if isinstance(child, dict | list):
            found.extend(paths_of(child, (*prefix, key)))
    return found


def _parent(tree: Any, path: Path_) -> tuple[Any, str | int] | None:
    node = tree
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    if isinstance(node, dict) and path[-1] in node:
        return node, path[-1]
    if isinstance(node, list) and isinstance(path[-1], int) and path[-1] < len(node):
        return node, path[-1]
    return None


class Mutated:
    """A mutated tree, shown (when hypothesis reports a failure) as the changes made to it."""

    def __init__(self, tree: Any, changes: list[str]) -> None:
        self.tree, self.changes = tree, changes

    def __repr__(self) -> str:
        return "Mutated(" + "; ".join(self.changes) + ")"


@st.composite
def mutated(draw: st.DrawFn, tree: Any, paths: list[Path_], most: int = 3) -> Mutated:
    """A copy of `tree` with 1 to `most` changes at `paths`: a value replaced by a hostile one,
    a key or item removed, an unknown key added, a list grown."""
    data, changes = copy.deepcopy(tree), []
    for _ in range(draw(st.integers(min_value=1, max_value=most))):
        path = draw(st.sampled_from(paths))
        where = _parent(data, path)
        if where is None:  # removed by an earlier change
            continue
        node, key = where
        change = draw(st.sampled_from(["replace", "replace", "replace", "remove", "add", "grow"]))
        if change == "remove":
            del node[key]
        elif change == "add" and isinstance(node[key], dict):
            name = draw(st.text(min_size=1, max_size=8))
            node[key][name] = draw(VALUES)
            change = f"add {name!r}"
        elif change == "grow" and isinstance(node[key], list) and node[key]:
            node[key] = node[key] + node[key][-1:] * draw(st.integers(1, 3))
        else:
            node[key] = draw(HOSTILE)
            change = f"= {node[key]!r:.80}"
        changes.append(f"{'.'.join(map(str, path))} {change}")
    return Mutated(data, changes)


def _located(line: str, paths: tuple[Path, ...]) -> bool:
    return any(re.match(rf"^{re.escape(str(path))}(:\d+)?: \S", line) for path in paths)


def assert_located_error(exc: BaseException, *paths: Path) -> None:
    """`exc` is kbgen's own error about one of `paths`: each line `path[:line]: …`, exit 1."""
    assert isinstance(exc, KbgenError), repr(exc)
    if isinstance(exc, InvalidInput):
        assert exc.problems and all(p.path in paths for p in exc.problems), exc.problems
    lines = str(exc).splitlines()
    assert lines and all(_located(line, paths) for line in lines), lines
    assert exit_code(exc) == 1


def assert_cli_outcome(result: Result, *paths: Path) -> None:
    """A command either succeeded or printed located lines about `paths`, a count, and exit 1."""
    if result.exit_code == 0:
        return
    assert isinstance(result.exception, SystemExit), result.exception  # handled: no traceback
    assert result.exit_code == 1, result.output
    *problems, count = result.stderr.splitlines()
    assert problems and all(_located(line, paths) for line in problems), result.stderr
    assert re.fullmatch(rf"{len(problems)} problems? in 1 file\(s\)", count), count
