"""After the docs build: every public name of autobatch (and autobatch.distributed) has
an entry in the API reference, or is listed there as an alias.

    python .ci/check_docs.py docs/_build/html
"""
import inspect
import re
import sys
from pathlib import Path

import autobatch
import autobatch.distributed


def main(build_dir):
    page = (Path(build_dir) / "api.html").read_text()
    ids = set(re.findall(r'<dt class="sig sig-object py" id="([^"]+)"', page))
    missing = []
    for module in (autobatch, autobatch.distributed):
        for name in dir(module):
            value = getattr(module, name)
            if name.startswith("_") or inspect.ismodule(value):
                continue
            defined_in = getattr(value, "__module__", None) or ""
            if module is not autobatch and not (defined_in == module.__name__
                                                or defined_in.startswith(module.__name__ + ".")):
                continue          # (autobatch.distributed's names are defined in its submodules)
            qualname = f"{module.__name__}.{name}"
            if qualname not in ids and f"<code class=\"docutils literal notranslate\"><span class=\"pre\">{name}</span></code>: the same as" not in page:
                missing.append(qualname)
    print(f"API reference: {len(ids)} entries")
    if missing:
        sys.exit(f"not in the API reference: {', '.join(missing)}")


if __name__ == "__main__":
    main(sys.argv[1])
