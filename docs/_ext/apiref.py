"""The `autobatch-api` directive: autodoc entries for every public name of `autobatch`
(and `autobatch.distributed`) at build time, grouped by where they are defined, so the
API reference never misses a name. Aliases (input_tensor = inputTensor) are listed as
such instead of being documented twice."""
import inspect
import os
import sys

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

# (title, test on the object): the first group that accepts a name gets it
GROUPS = [
    ("The computation graph", lambda o: _file(o) in ("current_graph.pxi", "expression.pxi", "static_graphs.pxi")
     or (inspect.isclass(o) and o.__name__ == "ComputationGraph")),
    ("Leaves: parameters, lookups, inputs, constants", lambda o: _file(o) == "ops_inputs.pxi"),
    ("Elementwise functions (one line of kernels/elementwise.h each)",
     lambda o: (_module(o) == "autobatch" and inspect.isroutine(o))
     or (isinstance(o, dict) and o and all(inspect.isroutine(v) for v in o.values()))),
    ("Arithmetic", lambda o: _file(o) == "ops_math.pxi"),
    ("Reductions and softmax", lambda o: _file(o) == "ops_reduce.pxi"),
    ("Structure, losses that pick, LSTM cells", lambda o: _file(o) == "ops_structure.pxi"),
    ("Selecting and pooling", lambda o: _file(o) == "ops_select.pxi"),
    ("Linear algebra, contractions, 1-d convolutions", lambda o: _file(o) == "ops_linalg.pxi"),
    ("Images", lambda o: _file(o) == "ops_conv.pxi"),
    ("Statistics", lambda o: _file(o) == "ops_stats.pxi"),
    ("Losses", lambda o: _file(o) == "ops_losses.pxi"),
    ("Random values", lambda o: _file(o) == "ops_random.pxi"),
    ("Parameters", lambda o: (inspect.isclass(o) and _module(o) == "autobatch.api.core")
     or _module(o) == "autobatch.model.parameters"),
    ("Global settings (DyNet's)", lambda o: _module(o) == "autobatch.settings"),
    ("Initializers", lambda o: _module(o) == "autobatch.model.initializers"),
    ("Trainers", lambda o: _module(o) == "autobatch.model.trainers"),
    ("Builders", lambda o: _module(o) in ("autobatch.model.builders", "autobatch.model.rnn_base",
                                          "autobatch.model.lstm_builders", "autobatch.model.softmax_builders")),
    ("Saving and loading", lambda o: _module(o) == "autobatch.io.formats"),
    ("Strategies", lambda o: _module(o) in ("autobatch.engine.strategies", "autobatch.engine.learned",
                                            "autobatch.strategies")),
    ("Configuration and reports", lambda o: _module(o) in ("autobatch.runtime.blas", "autobatch.report")),
    ("Errors", lambda o: _module(o) == "autobatch.errors"),
    ("Other", lambda o: True),
]


def _module(obj):
    return getattr(obj, "__module__", None)


def _in_package(obj, package):
    """Defined in `package` or one of its submodules (not imported into it from elsewhere)."""
    module = _module(obj) or ""
    return module == package or module.startswith(package + ".")


def _file(obj):
    code = getattr(obj, "__code__", None)
    return os.path.basename(code.co_filename) if code is not None else None


def public_names(module):
    return [n for n in sorted(dir(module), key=str.lower)
            if not n.startswith("_") and not inspect.ismodule(getattr(module, n))]


def _unlisted_bases(cls):
    """Our base classes that the reference has no entry of their own for (ComputationGraph's
    engine side): their members are documented with the class."""
    import autobatch
    return [b.__name__ for b in cls.__mro__[1:]
            if (b.__module__ or "").startswith("autobatch") and not hasattr(autobatch, b.__name__)]


def entry(qualname, obj):
    if inspect.isclass(obj):
        bases = _unlisted_bases(obj)
        return ([f".. autoclass:: {qualname}", "   :members:", "   :special-members: __init__"]
                + (["   :inherited-members:"] if bases else []) + [""])
    if callable(obj):
        return [f".. autofunction:: {qualname}", ""]
    # data has no docstring of its own: its module's docstring describes it (a test checks)
    module, _, name = qualname.rpartition(".")
    text = next((p for p in (sys.modules[module].__doc__ or "").split("\n\n") if f"``{name}``" in p), "")
    return [f".. py:data:: {name}", f"   :module: {module}", ""] + ["   " + line for line in text.splitlines()] + [""]


def autobatch_lines():
    import autobatch
    groups = {title: [] for title, _ in GROUPS}
    aliases = []
    for name in public_names(autobatch):
        obj = getattr(autobatch, name)
        canonical = getattr(obj, "__name__", name)
        if canonical != name and hasattr(autobatch, canonical) and getattr(autobatch, canonical) is obj:
            aliases.append(f"* ``{name}``: the same as :py:obj:`autobatch.{canonical}`")
            continue
        title = next(t for t, test in GROUPS if test(obj))
        groups[title] += entry(f"autobatch.{name}", obj)
    lines = [".. py:module:: autobatch", "   :no-index:", ""]
    for title, body in groups.items():
        if body:
            lines += [title, "-" * len(title), ""] + body
    if aliases:
        lines += ["Aliases", "-------", ""] + aliases + [""]
    return lines


def distributed_lines():
    import autobatch.distributed as dist
    lines = ["autobatch.distributed", "---------------------", "",
             ".. automodule:: autobatch.distributed", "   :no-members:", ""]
    aliases = []
    for name in public_names(dist):
        obj = getattr(dist, name)
        if not _in_package(obj, "autobatch.distributed"):     # defined in its submodules
            continue
        canonical = getattr(obj, "__name__", name)
        if canonical != name:
            aliases.append(f"* ``{name}``: the same as :py:obj:`autobatch.distributed.{canonical}`")
            continue
        lines += entry(f"autobatch.distributed.{name}", obj)
    return lines + [""] + aliases + [""]


class AutobatchAPI(SphinxDirective):
    has_content = False

    def run(self):
        node = nodes.section()
        node.document = self.state.document
        text = StringList(autobatch_lines() + distributed_lines(), source="autobatch-api")
        nested_parse_with_titles(self.state, text, node)
        return node.children


def setup(app):
    app.add_directive("autobatch-api", AutobatchAPI)
    return {"parallel_read_safe": True, "version": "1"}
