"""The DyNet-style expression API: Expression, the op wrappers, shapes, indexing,
inputs, parameters' handles and static graphs, compiled as one extension (core).
Imports engine/ and below."""
