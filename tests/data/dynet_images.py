"""A DyNet program on 3-D and 4-D values: a minibatch of images through conv2d_bias,
maxpooling2d, a broadcast channel scale, a batch-changing reshape (DyNet's masking
idiom), sum_dim and transpose; one loss, its gradients.

Run as `python dynet_images.py out.npz` with DyNet installed to record DyNet's numbers
(tests/data/dynet_images.npz); the test runs it with `import autobatch as dy`.
"""
import sys

import numpy as np

import dynet as dy

rng = np.random.default_rng(7)
IMAGES = rng.uniform(-1, 1, (6, 5, 2, 3)).astype(np.float32)      # (H, W, C, batch)
FILTERS = rng.uniform(-0.5, 0.5, (3, 2, 2, 4)).astype(np.float32)  # (KH, KW, C_in, C_out)
BIAS = rng.uniform(-0.1, 0.1, 4).astype(np.float32)
SCALE = rng.uniform(0.5, 1.5, (1, 1, 4)).astype(np.float32)        # one per channel
MASK = np.array([1.0, 0.0, 1.0], dtype=np.float32)                 # drop batch element 1


def run():
    pc = dy.ParameterCollection()
    f = pc.add_parameters(FILTERS.shape, init=dy.NumpyInitializer(FILTERS))
    b = pc.add_parameters(BIAS.shape, init=dy.NumpyInitializer(BIAS))
    s = pc.add_parameters(SCALE.shape, init=dy.NumpyInitializer(SCALE))
    dy.renew_cg()
    x = dy.inputTensor(IMAGES, batched=True)
    h = dy.rectify(dy.conv2d_bias(x, f, b, [1, 1], is_valid=False))      # (6, 5, 4) x 3
    h = dy.maxpooling2d(h, [2, 2], [2, 2], is_valid=False)               # (3, 3, 4) x 3
    h = dy.cmult(h, s)                                                   # channel scale
    t = dy.transpose(h, [1, 0, 2])                                       # (3, 3, 4)
    per_channel = dy.sum_dim(t, [0, 1])                                  # (4,) x 3
    mask = dy.reshape(dy.inputTensor(MASK), (1,), batch_size=3)          # (1,) x 3
    loss = dy.sum_batches(dy.sum_elems(dy.cmult(dy.square(per_channel), mask)))
    out = {"loss": np.array(loss.value()), "hidden": h.npvalue(), "per_channel": per_channel.npvalue()}
    loss.backward()
    out.update(grad_f=f.grad_as_array(), grad_b=b.grad_as_array(), grad_s=s.grad_as_array())
    return out


if __name__ == "__main__":
    np.savez(sys.argv[1], **run())
