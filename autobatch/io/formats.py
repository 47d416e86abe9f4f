"""`dy.save` / `dy.load`: the one place that chooses between the file formats, ours
(autobatch.io.autobatch_save) and DyNet's (autobatch.io.dynet_meta, which DyNet's own
`dy.load` reads)."""
from autobatch.io import autobatch_save, dynet_meta, files
from autobatch.io.autobatch_save import is_collection


def save(basename, objects, format=None):
    """Save parameters, lookup parameters, collections and objects with a
    `param_collection()` method (builders) to ``basename.data`` / ``basename.meta``.
    An object with `spec` and `from_spec` is saved with its spec, so `load` rebuilds
    it once its class is registered (`dy.register_savable`); saving needs no
    registration.

    format="dynet" writes DyNet's files instead (autobatch.io.dynet_meta), which DyNet's
    `dy.load` reads: Parameters, LookupParameters and the builders DyNet has."""
    basename = files.source(basename, "dy.save", files=False)[0]
    if format == "dynet":
        return dynet_meta.save(basename, list(objects))
    if format not in (None, "autobatch"):
        raise ValueError(f"dy.save: format must be 'autobatch' or 'dynet', got {format!r}")
    return autobatch_save.save(basename, objects)


def load(basename, params, allow_v1=False):
    """Load the objects saved by `save(basename, ...)`, adding them to the collection
    `params`, and return them in the saved order (DyNet semantics): Parameters and
    LookupParameters come back as new parameters, collections as new subcollections,
    objects with spec/from_spec as `cls.from_spec(spec, params)` populated with the saved
    values; `cls` must be registered (`dy.register_savable`): a file naming classes
    that are not is refused with one message naming them all and the calls to make. Any damaged or hostile
    file raises ModelFileError and adds nothing. `allow_v1` accepts files written
    before the metadata had a checksum.

    Files written by DyNet's `dy.save` (a ``.meta`` of pickles) load too, read as data
    (autobatch.io.dynet_meta): Parameters, LookupParameters, and DyNet's builders rebuilt
    as ours from their spec and populated in order, as DyNet's `dy.load` does."""
    basename = files.source(basename, "dy.load", files=False)[0]
    if not is_collection(params) or not hasattr(params, "_snapshot"):
        raise TypeError(f"dy.load: params must be a ParameterCollection, got {type(params).__name__}")
    meta_bytes = files.read_all(basename + ".meta", None, basename + ".meta")
    if meta_bytes.lstrip()[:1] == b"{":  # ours is a JSON object; no pickle opcode is "{"
        return autobatch_save.load(basename, params, meta_bytes, allow_v1)
    # DyNet's .meta: pickles of any protocol (Python 2 wrote protocol 0, "(S'Parameters'\n..."),
    # read as data only
    return dynet_meta.load(basename, params, meta_bytes)


def load_generator(basename, params, allow_v1=False):
    """As `load`, yielding the objects (all are loaded and validated first)."""
    yield from load(basename, params, allow_v1)
