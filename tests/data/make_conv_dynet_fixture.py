"""Regenerate conv_dynet.npz: conv2d_bias and maxpooling2d values and gradients from
the real DyNet, so that tests/ops/test_conv_kernels.py can compare against it without
DyNet installed. Run with an interpreter that has dynet (e.g. /work/venv-dynet):

    python tests/data/make_conv_dynet_fixture.py

Each case stores inputs and DyNet's outputs under "<case>/<name>"; "cases" lists the
case names and their settings as JSON.
"""
import json
import os

import dynet as dy
import numpy as np

# name, (H, W, C, batch), (KH, KW, C_out), stride, is_valid, kind
# kind "both": conv2d_bias and maxpooling2d (window KH x KW); "pool": maxpooling2d only
# (non-finite inputs); "dynet_bwd_differs": SAME with the kernel smaller than the
# stride, where DyNet's filter and max-pooling gradients use unclamped padding
CASES = [
    ("valid_s12", (5, 6, 2, 2), (3, 2, 3), (1, 2), True, "both"),
    ("same_s12", (5, 6, 2, 2), (3, 2, 3), (1, 2), False, "both"),
    ("same_even_kernel_s3", (7, 7, 1, 1), (4, 4, 2), (3, 3), False, "both"),
    ("pointwise_valid", (6, 4, 3, 3), (1, 1, 2), (1, 1), True, "both"),
    ("same_kernel_bigger_than_image", (4, 5, 2, 1), (5, 6, 1), (1, 2), False, "both"),
    ("valid_s21", (8, 3, 2, 2), (2, 3, 2), (2, 1), True, "both"),
    ("same_ties", (6, 6, 2, 1), (3, 3, 2), (2, 2), False, "ties"),
    ("same_nonfinite", (5, 5, 1, 1), (2, 2, 1), (2, 2), False, "pool"),
    ("same_kernel_below_stride", (6, 6, 2, 1), (1, 2, 2), (3, 3), False, "dynet_bwd_differs"),
]


def run(name, xdims, fdims, stride, valid, kind, rng):
    H, W, C, B = xdims
    KH, KW, CO = fdims
    x = rng.standard_normal((H, W, C, B))
    if kind == "ties":
        x = np.round(x)
    if kind == "pool":
        x[0, :, 0, 0] = -np.inf      # the top row, inside windows that touch padding
        x[4, 4, 0, 0] = -np.inf      # the bottom-right window: only padding and -inf
        x[2:4, 0:2, 0, 0] = np.nan   # a whole window of NaN
        x[2, 2, 0, 0] = np.nan       # a NaN beside finite values
    f = rng.standard_normal((KH, KW, C, CO))
    b = rng.standard_normal(CO)
    out = {"x": x, "f": f, "b": b}
    if kind != "pool":
        dy.renew_cg()
        X = dy.inputTensor(x, batched=True)
        F, Bi = dy.inputTensor(f), dy.inputTensor(b)
        Y = dy.conv2d_bias(X, F, Bi, list(stride), is_valid=valid)
        ydims = Y.dim()[0] + (B,)
        r = rng.standard_normal(ydims)
        loss = dy.sum_batches(dy.sum_elems(dy.cmult(Y, dy.inputTensor(r, batched=True))))
        loss.value()
        loss.backward(full=True)
        out.update(conv_dy=r, conv_y=Y.npvalue().reshape(ydims),
                   conv_dx=X.gradient().reshape(x.shape), conv_df=F.gradient().reshape(f.shape),
                   conv_db=Bi.gradient().reshape(b.shape))
    dy.renew_cg()
    X = dy.inputTensor(x, batched=True)
    P = dy.maxpooling2d(X, [KH, KW], list(stride), is_valid=valid)
    pdims = P.dim()[0] + (B,)
    r = rng.standard_normal(pdims)
    loss = dy.sum_batches(dy.sum_elems(dy.cmult(P, dy.inputTensor(r, batched=True))))
    loss.value()
    loss.backward(full=True)
    out.update(pool_dy=r, pool_y=P.npvalue().reshape(pdims), pool_dx=X.gradient().reshape(x.shape))
    return {f"{name}/{k}": v.astype(np.float32) for k, v in out.items()}


def main():
    rng = np.random.default_rng(20240601)
    arrays, meta = {}, []
    for name, xdims, fdims, stride, valid, kind in CASES:
        arrays.update(run(name, xdims, fdims, stride, valid, kind, rng))
        meta.append({"name": name, "ksize": list(fdims[:2]), "stride": list(stride),
                     "is_valid": valid, "kind": kind,
                     "dynet": getattr(dy, "__version__", "unknown")})
    arrays["cases"] = np.array(json.dumps(meta))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv_dynet.npz")
    np.savez_compressed(path, **arrays)
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
