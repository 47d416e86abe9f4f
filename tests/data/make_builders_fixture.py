"""Records DyNet's builder outputs with known parameter values
(tests/data/builders_dynet.json), run with DyNet:

    /work/venv-dynet/bin/python tests/data/make_builders_fixture.py

Every parameter of a builder (in parameters_list() order) gets values from
numpy's default_rng(i) for the i-th builder; the json holds the parameter names,
values, inputs, every step's output, the final s(), set_s with cells only, and a batch
of 2 fed to a state of batch 1. Softmax builders: logits, log distributions and losses."""
import json
import pathlib
import sys

import numpy as np
import dynet as dy

HERE = pathlib.Path(sys.argv[0]).resolve().parent
L, IN, H = 2, 3, 4


def fill(pc, seed):
    rng = np.random.default_rng(seed)
    params = {}
    for p in pc.parameters_list():
        v = rng.uniform(-0.8, 0.8, size=p.shape())
        p.set_value(v)
        params[p.name()] = v.tolist()
    return params


def vals(es):
    return [e.npvalue().tolist() for e in es]


out = {}
rng = np.random.default_rng(100)
xs = rng.uniform(-1, 1, size=(3, IN)).tolist()
xb = rng.uniform(-1, 1, size=(IN, 2)).tolist()
cells = rng.uniform(-1, 1, size=(L, H)).tolist()
for i, name in enumerate(["SimpleRNNBuilder", "VanillaLSTMBuilder", "CoupledLSTMBuilder",
                          "GRUBuilder", "FastLSTMBuilder", "CompactVanillaLSTMBuilder"]):
    pc = dy.ParameterCollection()
    b = getattr(dy, name)(L, IN, H, pc)
    rec = {"params": fill(pc, i), "names": [p.name() for p in pc.parameters_list()]}
    dy.renew_cg()
    states = b.initial_state().add_inputs([dy.inputVector(x) for x in xs])
    rec["outputs"] = vals(s.output() for s in states)
    rec["s"] = vals(states[-1].s())
    if name not in ("SimpleRNNBuilder", "GRUBuilder"):
        # only the cells: the hidden states stay those of the builder's last state
        st = states[-1].set_s([dy.inputVector(c) for c in cells])
        rec["set_s_cells"] = {"s": vals(st.s()), "out": st.add_input(dy.inputVector(xs[0])).output().npvalue().tolist()}
    # a batch fed to the initial state, and to a state of batch 1 (None: DyNet raises)
    rec["batched_initial"] = b.initial_state().add_input(dy.inputTensor(xb, batched=True)).output().npvalue().tolist()
    try:
        s0 = b.initial_state().add_input(dy.inputVector(xs[0]))
        rec["batched_after_1"] = s0.add_input(dy.inputTensor(xb, batched=True)).output().npvalue().tolist()
    except ValueError:
        rec["batched_after_1"] = None
    out[name] = rec

# VanillaLSTMBuilder(ln_lstm=True): DyNet puts the layer-norm parameters in the parent
# collection, so every parameter of pc, in creation order
pc = dy.ParameterCollection()
b = dy.VanillaLSTMBuilder(L, IN, H, pc, ln_lstm=True)
rec = {"params": fill(pc, 30), "names": [p.name() for p in pc.parameters_list()]}
dy.renew_cg()
rec["outputs"] = vals(b.initial_state().transduce([dy.inputVector(x) for x in xs]))
rec["batched_initial"] = b.initial_state().add_input(dy.inputTensor(xb, batched=True)).output().npvalue().tolist()
out["VanillaLSTMBuilder_ln"] = rec

# SparseLSTMBuilder after set_sparsity(0.25): weights and masks
pc = dy.ParameterCollection()
b = dy.SparseLSTMBuilder(L, IN, H, pc)
rec = {"params": fill(pc, 20), "names": [p.name() for p in pc.parameters_list()]}
b.set_sparsity(0.25)
rec["masks"] = {p.name(): p.as_array().tolist() for p in pc.parameters_list()}
dy.renew_cg()
rec["outputs"] = vals(b.initial_state().transduce([dy.inputVector(x) for x in xs]))
out["SparseLSTMBuilder"] = rec

rep = rng.uniform(-1, 1, size=IN).tolist()
pc = dy.ParameterCollection()
sm = dy.StandardSoftmaxBuilder(IN, 5, pc)
rec = {"params": fill(pc, 10), "names": [p.name() for p in pc.parameters_list()]}
dy.renew_cg()
x = dy.inputVector(rep)
rec.update(full_logits=sm.full_logits(x).npvalue().tolist(),
           full_log_distribution=sm.full_log_distribution(x).npvalue().tolist(),
           neg_log_softmax=sm.neg_log_softmax(x, 3).value(),
           neg_log_softmax_batch=sm.neg_log_softmax_batch(dy.inputTensor(xb, batched=True), [1, 4]).npvalue().tolist())
out["StandardSoftmaxBuilder"] = rec

words = {"dog": 0, "the": 3, "a": 2, "cat": 1, "fish": 5, "runs": 4, "unused": 6}
(HERE / "clusters_dynet.txt").write_text("c0 the\nc0 a\nc1\tdog\nc1 cat\nc1 fish\nc2 runs\n")
pc = dy.ParameterCollection()
cf = dy.ClassFactoredSoftmaxBuilder(IN, str(HERE / "clusters_dynet.txt"), words, pc)
rec = {"params": fill(pc, 11), "names": [p.name() for p in pc.parameters_list()], "words": words}
dy.renew_cg()
x = dy.inputVector(rep)
rec.update(full_logits=cf.full_logits(x).npvalue().tolist(),
           full_log_distribution=cf.full_log_distribution(x).npvalue().tolist(),
           class_logits=cf.class_logits(x).npvalue().tolist(),
           class_log_distribution=cf.class_log_distribution(x).npvalue().tolist(),
           subclass_logits=cf.subclass_logits(x, 1).npvalue().tolist(),
           subclass_log_distribution=cf.subclass_log_distribution(x, 0).npvalue().tolist(),
           neg_log_softmax={w: cf.neg_log_softmax(x, i).value() for w, i in words.items() if w != "unused"},
           neg_log_softmax_batch=cf.neg_log_softmax_batch(dy.inputTensor(xb, batched=True), [1, 4]).npvalue().tolist())
out["ClassFactoredSoftmaxBuilder"] = rec
out["inputs"] = {"xs": xs, "xb": xb, "cells": cells, "rep": rep}
(HERE / "builders_dynet.json").write_text(json.dumps(out))
