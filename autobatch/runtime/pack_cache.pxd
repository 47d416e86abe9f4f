# The cache of weights packed once per pass for the products: a struct every part may
# hold (a graph owns one, the nodes' context points at it); kernels/packed.pyx fills it.
from autobatch.runtime.memory cimport Arena

# op(A) of one weight, packed into panels of mr rows
ctypedef struct PackEntry:
    const float* src    # the weight's values (a parameter's storage)
    char ta             # 'N': op(A) = A, 'T': op(A) = A^T
    int m, k, lda       # op(A) is m x k
    int mr
    float* panels

# Valid for one pass of the engine only (see kernels/packed.pyx): packs_begin forgets it all.
ctypedef struct PackCache:
    Arena mem           # the panels; capacity kept from pass to pass
    PackEntry* items
    int n, cap
