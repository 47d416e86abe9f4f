"""The package's import graph: no import circle among its modules, and each part
imports only the parts below it (the layers of docs/architecture.md, written out as
LAYERS below).

Edges are read from the sources, not from a running interpreter: every Import and
ImportFrom of each autobatch/**/*.py (inside functions too, so a deferred import counts),
and every `cimport` / `import` line of each .pyx, .pxd and .pxi (indented ones too). A
.pxi belongs to the module whose .pyx includes it (api/core.pyx includes api/*.pxi); a
.pxd and the .pyx of the same name are one module. `from autobatch.io import files` is
an edge to autobatch.io.files when that module exists, else to the package autobatch.io.
A submodule is not taken to import its parent package's __init__ (Python runs it first,
but counting that would put every module on a circle through autobatch/__init__.py).
"""
import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "autobatch"

# part -> the parts its modules may import (docs/architecture.md). A part is a folder of
# the package or one of its top-level modules; every module not in a part listed here
# (autobatch/__init__.py, __main__, config, distributed, strategies, testing, report,
# progress, bench/) may import anything.
LAYERS = {
    "runtime": {"runtime", "errors"},
    "kernels": {"runtime", "kernels", "errors"},
    "engine": {"runtime", "kernels", "engine", "errors"},
    "api": {"runtime", "kernels", "engine", "api", "errors"},
    "settings": {"runtime", "engine", "api", "errors"},
    "io": {"api", "io", "errors"},
    "model": {"runtime", "api", "io", "model", "settings", "errors"},
    "errors": set(),
}

SOURCES = (".py", ".pyx", ".pxd")
# the import statements of Cython sources; parenthesised name lists are joined first
CY_FROM = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+c?import[ \t]+(.+)$", re.M)
CY_IMPORT = re.compile(r"^[ \t]*c?import[ \t]+(.+)$", re.M)
CY_INCLUDE = re.compile(r"^[ \t]*include[ \t]+[\"']([^\"']+)[\"']", re.M)
CY_PARENS = re.compile(r"(\bc?import[ \t]*)\(([^)]*)\)", re.S)
CY_STRINGS = re.compile(r"(\"\"\"|''')(.*?)\1", re.S)
CY_COMMENT = re.compile(r"#[^\n]*")


def module_of(path):
    """The dotted module name of a source file of the package."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules():
    """{module name: [its source files]} (.py, .pyx and .pxd; .pxi added by includes)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix in SOURCES and "__pycache__" not in path.parts:
            modules.setdefault(module_of(path), []).append(path)
    return modules


def resolve(name, imported, modules):
    """The module an import means: `from name import imported` (imported may be None)."""
    if imported and f"{name}.{imported}" in modules:
        return f"{name}.{imported}"
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def python_imports(path, module):
    """[(name, imported or None)] of every import of a .py file (relative ones resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out += [(base, a.name) for a in node.names]
    return out


def cython_text(path, seen):
    """The code of a Cython source with the .pxi files it includes, docstrings and
    comments dropped (so an example in a docstring is no import)."""
    text = CY_STRINGS.sub("", path.read_text())
    text = CY_COMMENT.sub("", text)
    for inc in CY_INCLUDE.findall(text):
        inc_path = (path.parent / inc).resolve()
        if inc_path.exists() and inc_path not in seen:
            seen.add(inc_path)
            text += "\n" + cython_text(inc_path, seen)
    return text


def cython_imports(text):
    """[(name, imported or None)] of the cimport / import lines of Cython code."""
    text = CY_PARENS.sub(lambda m: m.group(1) + " ".join(m.group(2).split()), text)
    out = []
    for base, names in CY_FROM.findall(text):
        out += [(base, n.split()[0]) for n in names.split(",") if n.strip()]
    for names in CY_IMPORT.findall(text):
        out += [(n.split()[0], None) for n in names.split(",") if n.strip()]
    return out


def import_graph():
    """{module: {modules of ours it imports}}, and {.pxi path: module including it}."""
    modules = all_modules()
    graph, included = {}, {}
    for module, paths in modules.items():
        edges = graph.setdefault(module, set())
        for path in paths:
            if path.suffix == ".py":
                found = python_imports(path, module)
            else:
                seen = set()
                found = cython_imports(cython_text(path, seen))
                included.update({p: module for p in seen})
            for name, imported in found:
                if name == "autobatch" or name.startswith("autobatch."):
                    target = resolve(name, imported, modules)
                    if target and target != module:
                        edges.add(target)
    return graph, included


def part_of(module):
    """The LAYERS part of a module, or None (a module free to import anything)."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return None


def find_cycle(graph):
    """One import circle as [m0, m1, ..., m0], or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state:
                cycle = visit(n)
                if cycle:
                    return cycle
        state[m] = "done"
        stack.pop()
        return None

    for m in sorted(graph):
        if m not in state:
            cycle = visit(m)
            if cycle:
                return cycle
    return None


@pytest.fixture(scope="module")
def graph():
    if not (PACKAGE / "api" / "core.pyx").exists():
        pytest.skip("the package's sources are not next to the tests (an installed wheel)")
    return import_graph()[0]


def test_the_parser_finds_the_edges(graph):
    # cimports of a .pxd / .pyx, imports of a .py, a `from autobatch.io import module`
    assert "autobatch.engine.scheduler" in graph["autobatch.engine.graph"]
    assert "autobatch.runtime.memory" in graph["autobatch.runtime.nodes"]
    assert "autobatch.errors" in graph["autobatch.api.core"]
    assert "autobatch.io.formats" in graph["autobatch.distributed.checkpoints"]
    assert "autobatch.distributed.processes" in graph["autobatch.distributed"]
    assert sum(len(e) for e in graph.values()) > 100
    # a submodule is not made to import its parent package
    assert "autobatch" not in graph["autobatch.engine.graph"]


def test_the_pxi_files_belong_to_core():
    if not (PACKAGE / "api" / "core.pyx").exists():
        pytest.skip("the package's sources are not next to the tests (an installed wheel)")
    _, included = import_graph()
    assert (PACKAGE / "api" / "expression.pxi").resolve() in included
    assert included[(PACKAGE / "api" / "expression.pxi").resolve()] == "autobatch.api.core"


def test_no_import_circle(graph):
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_each_part_imports_only_the_parts_below_it(graph):
    bad = []
    for module in sorted(graph):
        part = part_of(module)
        if part is None:
            continue
        for target in sorted(graph[module]):
            if part_of(target) not in LAYERS[part]:
                bad.append(f"{module} ({part}) imports {target} ({part_of(target) or 'top level'})")
    assert not bad, "imports the layers (docs/architecture.md) do not allow:\n" + "\n".join(bad)
