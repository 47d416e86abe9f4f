"""Every public name has a docstring: the names of `autobatch` (whatever is public when
the test runs, so a name added later is checked too), of `autobatch.distributed`, and the
public methods and properties of their classes. The API reference (docs/) is made from
these docstrings, so a name without one would be a blank entry there."""
import ast
import inspect
import pathlib
import re

import pytest

import autobatch
import autobatch.distributed

MODULES = [autobatch, autobatch.distributed]


def _own(module, name, value):
    """A public name the module offers (not a module it happens to import)."""
    if name.startswith("_") or inspect.ismodule(value):
        return False
    if module is autobatch:
        return True
    defined_in = getattr(value, "__module__", None) or ""      # a package's submodules too
    return defined_in == module.__name__ or defined_in.startswith(module.__name__ + ".")


def public_names():
    """(qualified name, object, is a class member) for every public name and member."""
    out = []
    for module in MODULES:
        for name in sorted(dir(module)):
            value = getattr(module, name)
            if not _own(module, name, value):
                continue
            out.append((f"{module.__name__}.{name}", value, None))
            if inspect.isclass(value):
                out += [(f"{module.__name__}.{name}.{m}", v, value)
                        for m, v in class_members(value)]
    return out


def class_members(cls):
    """Public methods and properties, inherited ones included (not object's or Exception's)."""
    seen = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__ == "builtins":
            continue
        for m, v in vars(klass).items():
            if m.startswith("_"):
                continue
            if callable(v) or inspect.isdatadescriptor(v) or isinstance(v, (classmethod, staticmethod)):
                seen[m] = getattr(cls, m, v) if not inspect.isdatadescriptor(v) else v
    return sorted(seen.items())


def text_of(obj):
    """The docstring less a signature line that Cython's embedsignature may put first."""
    doc = inspect.getdoc(obj) or ""
    name = getattr(obj, "__name__", "")
    lines = doc.splitlines()
    if lines and name and re.match(rf"{re.escape(name)}\(.*\)( -> .*)?$", lines[0]):
        lines = lines[1:]
    return "\n".join(lines).strip()


def is_data(value):
    return not (callable(value) or inspect.isdatadescriptor(value) or inspect.isclass(value))


ALL = public_names()


def test_there_are_names_to_check():
    assert len(ALL) > 300


@pytest.mark.parametrize("qualname, value, owner", [x for x in ALL if not is_data(x[1])],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_public_name_has_a_docstring(qualname, value, owner):
    doc = text_of(value)
    assert len(doc) >= 15, f"{qualname} has no docstring (or only a signature): say what it does"


def test_public_data_is_described_in_its_module_docstring():
    for module in MODULES:
        for name in dir(module):
            value = getattr(module, name)
            if _own(module, name, value) and is_data(value):
                assert f"``{name}``" in (module.__doc__ or ""), \
                    f"{module.__name__}.{name}: describe it in the module docstring"


def returns_expressions():
    """The functions that _core's stub says build expressions (return Expression)."""
    stub = pathlib.Path(autobatch.__file__).resolve().parent / "api/core.pyi"
    return {node.name for node in ast.parse(stub.read_text()).body
            if isinstance(node, ast.FunctionDef) and node.returns is not None
            and "Expression" in ast.unparse(node.returns)}


BUILDERS = returns_expressions()
OPS = [(q, v) for q, v, owner in ALL
       if owner is None and inspect.isroutine(v) and v.__module__ in ("autobatch", "autobatch.api.core")
       and v.__name__ in BUILDERS]


@pytest.mark.parametrize("qualname, value", OPS, ids=lambda x: x if isinstance(x, str) else "")
def test_expression_functions_say_how_they_batch(qualname, value):
    """The functions that build expressions say what happens to the batch dimension."""
    assert "batch" in text_of(value).lower(), f"{qualname}: say how it treats and batches the batch"
