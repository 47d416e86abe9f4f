"""Every public name of DyNet's Python reference exists here with DyNet's keywords,
or docs/dynet.md lists it with the reason it differs.

tests/data/dynet_public_names.txt was written by tests/data/make_dynet_public_names.py
from DyNet's doc/source/python_ref.rst and the dynet38 wheel: a qualified name, a tab,
and the signature DyNet reports ('-' where it reports none)."""
import ast
import inspect
import pathlib
import re

import pytest

import autobatch as dy

HERE = pathlib.Path(__file__).resolve().parents[1]      # tests/
ROWS = [line.rstrip("\n").split("\t") for line in (HERE / "data" / "dynet_public_names.txt").open()]
DOC = (HERE.parent / "docs" / "dynet.md").read_text()
# a listed name is a bullet starting with the name in backquotes: "- `to_device`: ..."
LISTED = set(re.findall(r"^- `([\w.]+)`", DOC, flags=re.M))


def resolve(qualified):
    obj = dy
    for part in qualified.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def parameter_names(signature):
    """The parameter names of a signature string such as '(x, dims=[1, 0], *args)'."""
    args = ast.parse(f"def f{signature}: pass").body[0].args
    every = args.posonlyargs + args.args + args.kwonlyargs
    return [a.arg for a in every if a.arg != "self"]


def accepts(obj, names):
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return False
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return True
    return all(n in params for n in names)


def test_every_name_exists_or_is_listed():
    missing = [q for q, _ in ROWS if resolve(q) is None and q not in LISTED]
    assert not missing, f"DyNet names missing here and not in docs/dynet.md: {missing}"


def test_every_name_takes_dynets_keywords_or_is_listed():
    wrong = []
    for qualified, signature in ROWS:
        obj = resolve(qualified)
        if obj is None or signature == "-" or qualified in LISTED:
            continue
        names = parameter_names(signature)
        has_var_positional = "*" in signature and not names
        if names and not has_var_positional and not accepts(obj, names):
            wrong.append(f"{qualified}{signature}")
    assert not wrong, f"keywords differ from DyNet's and not in docs/dynet.md: {wrong}"


def test_listed_names_are_dynet_names():
    known = {q for q, _ in ROWS}
    stray = sorted(LISTED - known)
    assert not stray, f"docs/dynet.md lists names DyNet's reference does not have: {stray}"


@pytest.mark.parametrize("section", ["Not yet implemented"])
def test_not_yet_implemented_names_are_really_missing(section):
    """A name implemented since must leave the 'not yet' list."""
    part = DOC.split(f"## {section}", 1)
    if len(part) < 2:
        return
    body = part[1].split("\n## ", 1)[0]
    done = [q for q in re.findall(r"^- `([\w.]+)`", body, flags=re.M) if resolve(q) is not None]
    assert not done, f"implemented now; take them off docs/dynet.md's '{section}': {done}"
