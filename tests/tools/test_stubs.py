"""The type stubs (autobatch/*.pyi) cover every public name: what editors complete and
mypy checks. A quick guard for the test run; `stubtest` in CI (.ci/stubs) also checks
signatures against the built extension. When this fails, add the name (with argument
and return types) to the .pyi the message names."""
import ast
import functools
import inspect
import pathlib

import pytest

import autobatch
import autobatch.distributed

PACKAGE = pathlib.Path(autobatch.__file__).resolve().parent


def stub_path(module):
    """autobatch/<module path>.pyi, or <module path>/__init__.pyi for a package."""
    path = PACKAGE / (module.replace(".", "/") + ".pyi")
    package = PACKAGE / module.replace(".", "/") / "__init__.pyi"
    return package if not path.exists() and package.exists() else path


@functools.cache
def stub(module):
    """{name: ast node} of autobatch/<module path>.pyi, star imports followed."""
    path = stub_path(module)
    assert path.exists(), f"no stub {path.relative_to(PACKAGE)} for autobatch.{module}"
    names = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            source = node.module.removeprefix("autobatch").removeprefix(".") or "__init__"
            for alias in node.names:
                if alias.name == "*":
                    names.update(stub(source))
                elif alias.asname == alias.name:            # an explicit re-export
                    names[alias.name] = ("import", source, alias.name)
                else:                                       # usable inside the stub only
                    names[alias.asname or alias.name] = ("private", source, alias.name)
        elif isinstance(node, ast.Import):
            names.update((a.asname, node) for a in node.names if a.asname)
    return names


def stub_class(module, name):
    node = stub(module)[name]
    while isinstance(node, tuple):                          # re-exported: follow it
        _, module, name = node
        node = stub(module)[name]
    return module, node


def members(module, node):
    """Names a stub class defines, its stub bases' included."""
    out = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.ClassDef)):
            out.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            out.add(item.target.id)
    for base in node.bases:
        if isinstance(base, ast.Name) and isinstance(stub(module).get(base.id), (ast.ClassDef, tuple)):
            out |= members(*stub_class(module, base.id))
    return out


def module_of(value):
    """The stub that declares `value`: its module's, else its package's (the submodules
    of autobatch.distributed have none: its __init__.pyi declares what they define)."""
    module = value.__module__.removeprefix("autobatch").removeprefix(".") or "__init__"
    while "." in module and not stub_path(module).exists():
        module = module.rpartition(".")[0]
    return module


def defined_in(value, module):
    """`value` is defined in `module` or, for a package, in one of its submodules."""
    name = getattr(value, "__module__", None) or ""
    return name == module.__name__ or name.startswith(module.__name__ + ".")


def public(module):
    return [(n, getattr(module, n)) for n in sorted(dir(module))
            if not n.startswith("_") and not inspect.ismodule(getattr(module, n))
            and (module is autobatch or defined_in(getattr(module, n), module))]


@pytest.mark.parametrize("module, stubname", [(autobatch, "__init__"),
                                              (autobatch.distributed, "distributed")],
                         ids=["autobatch", "distributed"])
def test_every_public_name_is_in_the_stubs(module, stubname):
    exported = {n for n, v in stub(stubname).items() if not (isinstance(v, tuple) and v[0] == "private")}
    missing = [n for n, _ in public(module) if n not in exported]
    assert not missing, f"add to autobatch/{stubname}.pyi (or the stub it re-exports): {missing}"


def test_every_public_member_of_a_class_is_in_its_stub():
    missing = []
    for module in (autobatch, autobatch.distributed):
        for name, cls in public(module):
            if not inspect.isclass(cls) or not cls.__module__.startswith("autobatch"):
                continue
            where, node = stub_class(module_of(cls), cls.__name__)
            have = members(where, node)
            for klass in cls.__mro__:
                if klass.__module__ == "builtins":
                    continue
                missing += [f"{where}.pyi: {cls.__name__}.{m}" for m in vars(klass)
                            if not m.startswith("_") and m not in have
                            and f"{where}.pyi: {cls.__name__}.{m}" not in missing]
    assert not missing, "not in the stubs: " + ", ".join(missing)


def test_py_typed_marks_the_package_as_typed():
    assert (PACKAGE / "py.typed").exists()
