"""The engine: the op table, graph storage, signatures, the scheduler and its
strategies, the forward loop, fusion, backward, checkpoints and statistics. Imports
runtime/ and kernels/."""
