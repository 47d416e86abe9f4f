"""Names that builders gave their parameters before they took DyNet's, mapped to
DyNet's, so that files saved then still load.

Before, a builder named its parameters by role and layer ("/vanilla-lstm-builder/p_x0",
"/gru-builder/x2z1") and two collections had other names ("coupled-lstm-builder",
"bi-rnn-builder"); now, as DyNet, they are unnamed in creation order
("/vanilla-lstm-builder/_0", ...) in "lstm-builder" and "birnn". `migrate(name)`
turns an old name into the new one and leaves every other name alone.
"""
import re

# old subcollection name -> (new name, the old parameter names of one layer, in order)
_BUILDERS = {
    "simple-rnn-builder": ("simple-rnn-builder", ("x2h", "h2h", "bh")),
    "vanilla-lstm-builder": ("vanilla-lstm-builder", ("p_x", "p_h", "p_bias")),
    "coupled-lstm-builder": ("lstm-builder", ("x2i", "h2i", "c2i", "bi", "x2o", "h2o", "c2o",
                                              "bo", "x2c", "h2c", "bc")),
    "gru-builder": ("gru-builder", ("x2z", "h2z", "bz", "x2r", "h2r", "br", "x2h", "h2h", "bh")),
}
_COLLECTIONS = {"bi-rnn-builder": "birnn", "coupled-lstm-builder": "lstm-builder"}
_INDEXED = re.compile(r"(.*?)(_\d+)?")
_LAYERED = re.compile(r"([a-z_2]+?)(\d+)")


def migrate(name):
    """The current name of a parameter or collection saved under `name`."""
    if not isinstance(name, str) or "/" not in name:
        return name
    parts = name.split("/")
    old_parent = None
    for i, part in enumerate(parts[:-1]):
        base, index = _INDEXED.fullmatch(part).groups()
        old_parent = base
        if base in _COLLECTIONS:
            parts[i] = _COLLECTIONS[base] + (index or "")
    leaf = _LAYERED.fullmatch(parts[-1])
    if leaf and old_parent in _BUILDERS:
        names = _BUILDERS[old_parent][1]
        role, layer = leaf.group(1), int(leaf.group(2))
        if role in names:
            parts[-1] = f"_{layer * len(names) + names.index(role)}"
    return "/".join(parts)
