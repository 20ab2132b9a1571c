"""The package's import graph: no cycle, no module importing a layer above its own (README.md: Where things live)."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "sp_scan"

LAYERS = [
    ["", "errors", "network", "workers", "crc", "sqlitefile", "retry"],
    ["crypto", "_checks"],
    ["types", "wire", "formats", "address", "headers", "proto", "proto.*"],
    ["native", "native.*", "reference", "reference.*"],
    ["backend"],
    ["extract", "summary", "scan", "send", "dleq", "block", "filters"],
    ["psbt", "psbt.*", "descriptor", "node"],
    ["index", "index.*"],
    ["wallet", "wallet.*"],
    ["server", "server.*"],
    ["cli", "cli.*"],
]
"""Lowest first; a module imports its own layer or lower ones, never a higher one ("" is sp_scan itself)."""

SIBLINGS_APART = [("native*", "reference*")]
"""Layers whose members never import one another: the two backends."""


def modules() -> dict[str, Path]:
    """sp_scan's modules by dotted name under the package ("scan", "index.store", "cli"; "" for sp_scan)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The sp_scan modules `name` imports anywhere in its body (function-level imports too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name == "sp_scan" or a.name.startswith("sp_scan.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
                if module != "sp_scan" and not module.startswith("sp_scan."):
                    continue
                module = module.removeprefix("sp_scan").removeprefix(".")
            # `from . import scan` imports the submodule; `from .index import Index` the package.
            targets = [f"{module}.{a.name}".strip(".") if f"{module}.{a.name}".strip(".") in known else module for a in node.names]
        else:
            continue
        for target in targets:
            target = target.removeprefix("sp_scan").removeprefix(".")
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target != name:
                found.add(target)
    return found


def layer_of(name: str) -> int:
    matches = [i for i, layer in enumerate(LAYERS) if any(fnmatch.fnmatchcase(name, p) for p in layer)]
    assert len(matches) == 1, f"sp_scan.{name} is in {len(matches)} layers of LAYERS (add it to exactly one)"
    return matches[0]


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


GRAPH = graph()


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges[v]:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_one_layer():
    assert {name: layer_of(name) for name in GRAPH}


def test_no_module_imports_a_layer_above_its_own():
    upward = [f"{a} -> {b}" for a, targets in GRAPH.items() for b in targets if layer_of(b) > layer_of(a)]
    assert upward == []


def test_the_import_graph_has_no_cycle():
    assert cycles(GRAPH) == []


@pytest.mark.parametrize(("one", "other"), SIBLINGS_APART)
def test_the_two_backends_do_not_import_each_other(one, other):
    crossing = [
        f"{a} -> {b}"
        for a, targets in GRAPH.items()
        for b in targets
        if (fnmatch.fnmatchcase(a, one + "*") and fnmatch.fnmatchcase(b, other)) or (fnmatch.fnmatchcase(a, other) and fnmatch.fnmatchcase(b, one + "*"))
    ]
    assert crossing == []


def test_the_checks_catch_a_cycle_and_an_upward_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert layer_of("cli.index") > layer_of("index.store") > layer_of("backend") > layer_of("native")
    found = modules()
    assert "index" in imports("cli.index", found["cli.index"], set(found))
    assert "_checks" in imports("native", found["native"], set(found))


def test_every_package_is_installed():
    import tomllib

    declared = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = {".".join(("sp_scan", *p.parent.relative_to(PACKAGE).parts)) for p in PACKAGE.rglob("__init__.py")}
    assert sorted(declared) == sorted(found)
