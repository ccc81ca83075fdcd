"""The shape of the code, checked: no import cycle among kbgen's modules, and no module too long
to read (the models too: one module per part of a record)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src"
MODULES = {
    ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): path
    for path in sorted((SRC / "kbgen").rglob("*.py"))
}
MAX_LINES = 550
MAX_LOADING_LINES = 250  # kb/loading.py is loading only


def imports_of(name: str) -> set[str]:
    """The kbgen modules `name` imports, at the top or inside a function (a cycle through a
    lazy import is a cycle all the same)."""
    package = name if MODULES[name].name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in found if module in MODULES and module != name}


def test_the_walk_sees_the_imports() -> None:
    """The walk is not vacuous: it finds what the layering contracts are about."""
    assert "kbgen.kb.store" in imports_of("kbgen.kb.documents")
    assert "kbgen.kb.loading" in imports_of("kbgen.site.build")  # a lazy import, inside a function


def test_no_import_cycle_among_kbgen_modules() -> None:
    """Package inits included: `from kbgen.x import y` in a module of `kbgen.x` runs x's init,
    and an init that imports that module back is a cycle."""
    graph = {name: imports_of(name) for name in MODULES}
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"an import cycle: {' -> '.join(exc.args[1])}")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_550_lines(name: str) -> None:
    lines = MODULES[name].read_text().count("\n")
    assert lines <= MAX_LINES, f"{MODULES[name]}: {lines} lines; split it by what it does"


def test_loading_is_under_250_lines() -> None:
    assert MODULES["kbgen.kb.loading"].read_text().count("\n") <= MAX_LOADING_LINES
