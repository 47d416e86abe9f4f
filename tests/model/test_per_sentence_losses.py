"""One tree or one sentence per graph and per update (the shape of DyNet's benchmark
scripts treenn.py and bilstm-tagger.py, benchmarks/per_sentence.py): the losses of a few
training steps, bit for bit, against values recorded when the per-graph fixed costs
(renew_cg, parameters' nodes, initial_state, the trainer's bookkeeping) were cut down.
A change to that bookkeeping must not change a number; one to the math shows here as a
changed loss, and the recorded values are then made again (RECORD=1 prints them)."""
import os

import numpy as np
import pytest

import autobatch as dy

TREES = [("a", ("b", "c")), (("d", "a"), "e"), "b", (("c", "c"), ("e", ("a", "d")))]
SENTS = [[("w1", 0), ("w2", 1), ("w3", 0)], [("w4", 2)], [("w2", 1), ("w5", 2), ("w1", 0),
                                                        ("w3", 1)]]
WORDS = {w: i for i, w in enumerate(["a", "b", "c", "d", "e"])}


@pytest.fixture(autouse=True)
def recorded_strategy():
    """The values were recorded under 'agenda': another strategy batches differently,
    so sums may round differently in the last bit."""
    before = dy.default_strategy()
    dy.set_default_strategy("agenda")
    yield
    dy.set_default_strategy(before)


def tree_step(pc, trainer, tree, ps, E):
    dy.renew_cg()
    (Wi, Wu), (Ui, Uf1, Uf2, Uu), (bi, bu, bf), W = [[dy.parameter(p) for p in g] for g in ps]

    def cell(t, out):
        if isinstance(t, str):
            x = E[WORDS[t]]
            h = dy.cmult(dy.logistic(dy.affine_transform([bi, Wi, x])),
                         dy.tanh(dy.affine_transform([bu, Wu, x])))
            out.append(h)
            return h, h
        (h1, c1), (h2, c2) = cell(t[0], out), cell(t[1], out)
        e = dy.concatenate([h1, h2])
        c = (dy.cmult(dy.logistic(dy.affine_transform([bi, Ui, e])),
                      dy.tanh(dy.affine_transform([bu, Uu, e])))
             + dy.cmult(dy.logistic(dy.affine_transform([bf, Uf1, h1])), c1)
             + dy.cmult(dy.logistic(dy.affine_transform([bf, Uf2, h2])), c2))
        h = dy.tanh(c)
        out.append(h)
        return h, c

    hs = []
    cell(tree, hs)
    loss = dy.esum([dy.pickneglogsoftmax(W[0] * h, k % 3) for k, h in enumerate(hs)])
    value = loss.value()
    loss.backward()
    trainer.update()
    return value


def run_trees(trainer_cls, sparse, steps=6):
    pc = dy.ParameterCollection(seed=7)
    d = 6
    ps = [[pc.add_parameters((d, d)) for _ in "iu"],
          [pc.add_parameters((d, 2 * d)), pc.add_parameters((d, d)), pc.add_parameters((d, d)),
           pc.add_parameters((d, 2 * d))],
          [pc.add_parameters(d) for _ in "iuf"], [pc.add_parameters((3, d))]]
    E = pc.add_lookup_parameters((len(WORDS) + 3, d))
    trainer = trainer_cls(pc)
    trainer.set_sparse_updates(sparse)
    return [tree_step(pc, trainer, TREES[k % len(TREES)], ps, E) for k in range(steps)]


def run_tagger(trainer_cls, sparse, steps=6):
    pc = dy.ParameterCollection(seed=11)
    words = {w: i for i, w in enumerate(["w1", "w2", "w3", "w4", "w5"])}
    E = pc.add_lookup_parameters((len(words) + 2, 5))
    pH, pO = pc.add_parameters((4, 8)), pc.add_parameters((3, 4))
    fwd, bwd = dy.VanillaLSTMBuilder(1, 5, 4, pc), dy.VanillaLSTMBuilder(1, 5, 4, pc)
    trainer = trainer_cls(pc)
    trainer.set_sparse_updates(sparse)
    out = []
    for k in range(steps):
        sent = SENTS[k % len(SENTS)]
        dy.renew_cg()
        H, O = dy.parameter(pH), dy.parameter(pO)
        f0, b0 = fwd.initial_state(), bwd.initial_state()
        xs = [E[words[w]] for w, _ in sent]
        fs, bs = f0.transduce(xs), b0.transduce(reversed(xs))
        loss = dy.esum([dy.pickneglogsoftmax(O * dy.tanh(H * dy.concatenate([f, b])), t)
                        for f, b, (_, t) in zip(fs, reversed(bs), sent)])
        out.append(loss.scalar_value())
        loss.backward()
        trainer.update()
    return out


CASES = {(model, name, sparse): (run, cls)
         for model, run in (("trees", run_trees), ("tagger", run_tagger))
         for name, cls in (("adam", dy.AdamTrainer), ("sgd", dy.SimpleSGDTrainer))
         for sparse in (False, True)}

RECORDED = {
    ('tagger', 'adam', False): ['0x1.b0a6100000000p+1', '0x1.0aafe00000000p+0', '0x1.122c720000000p+2', '0x1.adbfdc0000000p+1', '0x1.09def20000000p+0', '0x1.1134fa0000000p+2'],
    ('tagger', 'adam', True): ['0x1.b0a6100000000p+1', '0x1.0aafe00000000p+0', '0x1.1230980000000p+2', '0x1.adcfd80000000p+1', '0x1.09f41a0000000p+0', '0x1.1145180000000p+2'],
    ('tagger', 'sgd', False): ['0x1.b0a6100000000p+1', '0x1.116df80000000p+0', '0x1.0ff0460000000p+2', '0x1.98b76c0000000p+1', '0x1.11551a0000000p+0', '0x1.0938d80000000p+2'],
    ('tagger', 'sgd', True): ['0x1.b0a6100000000p+1', '0x1.116df80000000p+0', '0x1.0ff0460000000p+2', '0x1.98b76c0000000p+1', '0x1.11551a0000000p+0', '0x1.0938d80000000p+2'],
    ('trees', 'adam', False): ['0x1.5e8b120000000p+2', '0x1.584db00000000p+2', '0x1.3e97920000000p+0', '0x1.56c14e0000000p+3', '0x1.5ca3fc0000000p+2', '0x1.5766fa0000000p+2'],
    ('trees', 'adam', True): ['0x1.5e8b120000000p+2', '0x1.584db00000000p+2', '0x1.3eaf540000000p+0', '0x1.56c4980000000p+3', '0x1.5cb6bc0000000p+2', '0x1.5779200000000p+2'],
    ('trees', 'sgd', False): ['0x1.5e8b120000000p+2', '0x1.567d8c0000000p+2', '0x1.32ad3e0000000p+0', '0x1.5f03540000000p+3', '0x1.5fc6140000000p+2', '0x1.5530360000000p+2'],
    ('trees', 'sgd', True): ['0x1.5e8b120000000p+2', '0x1.567d8c0000000p+2', '0x1.32ad3e0000000p+0', '0x1.5f03540000000p+3', '0x1.5fc6140000000p+2', '0x1.5530360000000p+2'],
}


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: "-".join(map(str, c)))
def test_losses_bit_for_bit(case):
    run, cls = CASES[case]
    losses = [float(v) for v in run(cls, case[2])]
    if os.environ.get("RECORD"):
        print(f"    {case!r}: {[v.hex() for v in losses]!r},")
    assert np.all(np.isfinite(losses))
    assert [v.hex() for v in losses] == RECORDED[case]


def test_losses_change_with_training():
    # the steps train: the losses of one tree repeated fall (the comparison above is of
    # numbers that move, not of a constant)
    first = run_trees(dy.SimpleSGDTrainer, False, steps=len(TREES) * 4)
    assert first[-len(TREES)] < first[0]
