"""Batched forward and backward kernels on raw float*, one module per family, with the
products (gemm, packed weights) and the C headers beside them. Imports only runtime/."""
