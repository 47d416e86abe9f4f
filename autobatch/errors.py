"""The exceptions of autobatch that are its own (everything else is a built-in
exception: TypeError, IndexError, MemoryError ...)."""


class DimensionError(ValueError):
    """Arguments of an op have shapes that do not fit together, or a shape is out of
    range."""


class StaleExpressionError(RuntimeError):
    """An Expression from a computation graph that has been renewed."""


class ModelFileError(ValueError):
    """A model file is truncated, corrupt, hostile, or does not match what it is loaded into."""
