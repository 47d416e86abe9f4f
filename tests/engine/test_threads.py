"""The thread model: each thread builds its own computation graph; parameters are
shared. Threads that train their own models run at the same time without crashing
and get the numbers they get alone; an Expression never crosses to another thread's
graph or process."""
import pickle
import threading

import numpy as np
import pytest

import autobatch as dy


def train(seed, steps, out, strategy):
    pc = dy.ParameterCollection(seed=seed)
    W, b = pc.add_parameters((8, 8)), pc.add_parameters(8)
    trainer = dy.SimpleSGDTrainer(pc, 0.05)
    rng = np.random.default_rng(seed)
    data = [rng.normal(size=8).astype(np.float32) for _ in range(12)]
    losses = []
    for _ in range(steps):
        dy.renew_cg(strategy=strategy)
        loss = dy.esum([dy.squared_norm(dy.tanh(W * dy.tanh(W * dy.inputVector(x) + b) + b))
                        for x in data])
        losses.append(loss.value())
        loss.backward()
        trainer.update()
    out[seed] = (losses, W.as_array())


@pytest.mark.parametrize("strategy", ["none", "agenda"])
def test_threads_training_their_own_models(strategy):
    alone = {}
    for seed in (1, 2, 3):
        train(seed, 15, alone, strategy)
    together = {}
    threads = [threading.Thread(target=train, args=(seed, 15, together, strategy)) for seed in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for seed in (1, 2, 3):
        np.testing.assert_array_equal(together[seed][0], alone[seed][0])
        np.testing.assert_array_equal(together[seed][1], alone[seed][1])


def test_an_expression_of_another_thread_is_refused():
    dy.renew_cg()
    mine = dy.inputVector([1.0, 2.0])
    seen = {}

    def other():
        dy.renew_cg()
        try:
            dy.tanh(mine)
        except dy.StaleExpressionError as e:
            seen["error"] = str(e)
        seen["own"] = dy.sum_elems(dy.inputVector([3.0, 4.0])).value()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert "another thread" in seen["error"]
    assert seen["own"] == 7.0
    assert mine.value() == [1.0, 2.0]          # this thread's graph is untouched


def test_expressions_cannot_be_pickled():
    dy.renew_cg()
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(dy.inputVector([1.0]))


def test_short_lived_threads_each_get_a_graph_of_their_own():
    # a new thread may reuse a finished thread's stack and thread-local storage: it must
    # still start with a graph of its own
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((16, 16))
    x0 = np.ones(16, dtype=np.float32)
    dy.renew_cg()
    want = dy.sum_elems(dy.tanh(W * dy.inputVector(x0))).value()
    results = []

    def work():
        dy.renew_cg()
        e = dy.inputVector(x0)
        for _ in range(50):
            e = dy.tanh(W * e) * 0.5 + e * 0.5
        results.append(dy.sum_elems(dy.tanh(W * dy.inputVector(x0))).value())

    for _ in range(20):
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == [want] * 40
