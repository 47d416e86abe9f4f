"""Lists DyNet's public Python API as python_ref.rst documents it, with signatures.

Run with the dynet38 venv's python: gen_names.py python_ref_directives.rst
Each line: qualified name, a tab, the signature DyNet's module reports (or '-').
Names that dynet38 exports beyond python_ref.rst are appended to
dynet_public_names.txt by hand, in the same format (argmax: `argmax\t(x, gradient_mode)`,
as inspect.signature(dynet.argmax) reports it)."""
import inspect, re, sys
import dynet

RNN_BASE = dynet.SimpleRNNBuilder.__mro__[1]  # _RNNBuilder is not exported


def signature(obj):
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "-"


ref = open(sys.argv[1]).read()
seen = set()
for kind, name, opts in re.findall(r"\.\. (autofunction|autoclass):: dynet\.(\w+)((?:\n   :[\w-]+:)*)", ref):
    obj = RNN_BASE if name == "_RNNBuilder" else getattr(dynet, name)
    rows = [(name, obj)]
    if kind == "autoclass":
        undoc = ":undoc-members:" in opts
        for m, v in sorted(vars(obj).items()):
            if not m.startswith("_") and (undoc or getattr(v, "__doc__", None)):
                rows.append((f"{name}.{m}", v))
    for qual, v in rows:
        if qual not in seen:
            seen.add(qual)
            print(f"{qual}\t{signature(v) if callable(v) and kind == 'autofunction' or '.' in qual else '-'}")
