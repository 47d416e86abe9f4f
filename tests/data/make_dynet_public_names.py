"""Lists DyNet's public Python API, with signatures, for tests/data/dynet_public_names.txt.

Run with the dynet38 venv's python, from the repository's root:

    python tests/data/make_dynet_public_names.py python_ref_directives.rst > names.txt
    python tests/data/make_dynet_public_names.py --beyond tests/data/dynet_public_names.txt \
        >> tests/data/dynet_public_names.txt

The first lists the names python_ref.rst documents (its autofunction and autoclass
directives); the second appends the names dynet38 exports beyond them, those of
dir(dynet) and of dir(C) for every public class C (inherited members included), that
the file does not hold yet. Each line: qualified name, a tab, the signature DyNet's
module reports (or '-')."""
import inspect, re, sys
import dynet

RNN_BASE = dynet.SimpleRNNBuilder.__mro__[1]  # _RNNBuilder is not exported


def signature(obj):
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "-"


def beyond(listed):
    """Rows of every public name of dynet and of its classes not in `listed`."""
    for name in sorted(n for n in dir(dynet) if not n.startswith("_")):
        obj = getattr(dynet, name)
        if inspect.ismodule(obj):
            continue
        if name not in listed:
            print(f"{name}\t{signature(obj) if callable(obj) and not inspect.isclass(obj) else '-'}")
        if inspect.isclass(obj):
            for m in sorted(n for n in dir(obj) if not n.startswith("_")):
                if f"{name}.{m}" not in listed:
                    print(f"{name}.{m}\t{signature(getattr(obj, m))}")


if sys.argv[1] == "--beyond":
    beyond({line.split("\t")[0] for line in open(sys.argv[2])})
    sys.exit(0)
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
