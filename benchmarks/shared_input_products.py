"""Products that share an input, merged or not, on the engine's packed kernel: the five
gates of an op-level Tree-LSTM node (W_g: 256 x 512, one X of 512 x N).
forward: five W_g X against one [W_1; ..; W_5] X (1,280 rows);
dX: five W_g^T dY_g accumulated (beta 0, then 1) against one [W_1; ..; W_5]^T
[dY_1; ..; dY_5] (K = 1,280; stacking the dY's, which the engine would have to do, is
not counted). Packing is included on both sides (the same weights are packed).
Medians of 15 runs, alternating.
OPENBLAS_NUM_THREADS=1 python benchmarks/shared_input_products.py"""
import time

import numpy as np

from autobatch.kernels.packed import packed_gemm_for_tests

rng = np.random.default_rng(0)


def fortran(*shape):
    return np.asfortranarray(rng.standard_normal(shape).astype(np.float32))


def race(a, b, rounds=15):
    t = {a: [], b: []}
    for r in range(rounds):
        for f in ((a, b) if r % 2 else (b, a)):
            t0 = time.perf_counter()
            f()
            t[f].append(time.perf_counter() - t0)
    return np.median(t[a]), np.median(t[b])


for N in (64, 256, 700):
    Ws = [fortran(256, 512) for _ in range(5)]
    X, dYs = fortran(512, N), [fortran(256, N) for _ in range(5)]
    W_all, dY_all = np.asfortranarray(np.vstack(Ws)), np.asfortranarray(np.vstack(dYs))
    Ys = [np.asfortranarray(np.zeros((256, N), np.float32)) for _ in range(5)]
    Y_all = np.asfortranarray(np.zeros((1280, N), np.float32))
    dX5, dX1 = (np.asfortranarray(np.zeros((512, N), np.float32)) for _ in range(2))

    def five_fwd():
        for W, Y in zip(Ws, Ys):
            assert packed_gemm_for_tests("N", W, X, 0.0, Y)

    def one_fwd():
        assert packed_gemm_for_tests("N", W_all, X, 0.0, Y_all)

    def five_dx():
        for g, (W, dY) in enumerate(zip(Ws, dYs)):
            assert packed_gemm_for_tests("T", W, dY, 1.0 if g else 0.0, dX5)

    def one_dx():
        assert packed_gemm_for_tests("T", W_all, dY_all, 0.0, dX1)

    f5, f1 = race(five_fwd, one_fwd)
    d5, d1 = race(five_dx, one_dx)
    print(f"N = {N:4d}  forward: five {f5 * 1e3:6.2f} ms, one {f1 * 1e3:6.2f} ms, "
          f"five / one {f5 / f1:.2f}   dX: five {d5 * 1e3:6.2f} ms, one {d1 * 1e3:6.2f} ms, "
          f"five / one {d5 / d1:.2f}")
