"""The bench's workloads beyond the five standard tasks (tree_tasks, lattice_tasks,
sequence_tasks): every model gives the same loss and the same gradients batched as
unbatched, under every built-in strategy with fusion on and off; the data generators
give the structures the models assume (binary typed trees, lattice words that spell
their characters, correlated sentence pairs); DyNet runs each of them (when an
interpreter with DyNet is found) to the same losses as ours."""
import numpy as np
import pytest
from test_bench import dynet_python

import autobatch as dy
from autobatch.bench import data, lattice_tasks, run, sequence_tasks, tasks, tree_tasks

WORKLOADS = tuple(c.name for c in tree_tasks.CLASSES + lattice_tasks.CLASSES
                  + sequence_tasks.CLASSES)
HIDDEN = 6
BATCH = 3
# the variants that build different graphs: the BiRNN's (builder cells or ops); the
# others build one graph in both (test_bench.test_ops_variant_is_the_builder_variant_...)
CASES = [(t, "ops") for t in WORKLOADS] + [("birnn", "builder")]


@pytest.fixture(scope="module")
def instances():
    return {t: data.make(t, BATCH, seed=3) for t in WORKLOADS}


def loss_and_gradients(task, variant, meta, batch, strategy, fusion):
    """A fresh model (the same seeded values every time), one step's loss and the
    gradient of every parameter and lookup table."""
    model = tasks.make(task, HIDDEN, seed=1, meta=meta, variant=variant)
    dy.renew_cg(strategy=strategy, fusion=fusion)
    loss = dy.esum([model.loss(i) for i in batch])
    value = loss.value()
    loss.backward()
    params = model.pc.parameters_list() + model.pc.lookup_parameters_list()
    return value, [p.grad_as_array().copy() for p in params], dy.cg().stats()


@pytest.mark.parametrize("task,variant", CASES)
def test_batched_equals_unbatched(task, variant, instances, strategies):
    meta, batch = instances[task]
    ref_value, ref_grads, ref_stats = loss_and_gradients(task, variant, meta, batch, "none", False)
    assert np.isfinite(ref_value) and ref_value > 0
    assert any(np.abs(g).max() > 0 for g in ref_grads)
    fewer = []
    for strategy in strategies:
        for fusion in (False, True):
            value, grads, st = loss_and_gradients(task, variant, meta, batch, strategy, fusion)
            where = f"{task}/{variant} under {strategy}, fusion {fusion}"
            assert value == pytest.approx(ref_value, rel=1e-5), where
            for k, (g, r) in enumerate(zip(grads, ref_grads)):
                np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5,
                                           err_msg=f"{where}: gradient of parameter {k}")
            fewer.append(st["batches"] < ref_stats["batches"])
    assert any(fewer), "no strategy batched anything"


def test_birnn_ops_cells_are_the_builder_cells(instances):
    """Same seed, same parameter order: the written-out Elman cells compute what
    SimpleRNNBuilder does, to the last bit."""
    meta, batch = instances["birnn"]
    got = {v: loss_and_gradients("birnn", v, meta, batch, "agenda", True)[:2]
           for v in tasks.VARIANTS}
    assert got["ops"][0] == got["builder"][0]
    for g_ops, g_builder in zip(got["ops"][1], got["builder"][1]):
        np.testing.assert_array_equal(g_ops, g_builder)


@pytest.mark.parametrize("task", WORKLOADS)
def test_flops_counted(task, instances):
    meta, batch = instances[task]
    model = tasks.make(task, HIDDEN, seed=1, meta=meta)
    assert all(model.flops(i) > 0 for i in batch)


def test_every_workload_is_registered():
    assert set(WORKLOADS) <= set(tasks.TASKS)
    assert len(tasks.TASKS) == len(set(tasks.TASKS))
    with pytest.raises(ValueError, match="unknown task"):
        tasks.make("no-such-task")
    assert tasks.expand(["literature"]) == list(WORKLOADS)
    assert tasks.expand(["birnn", "standard", "lm"]) == ["birnn", "tagger", "tagger-char",
                                                          "treelstm", "parser", "lm"]
    assert tasks.GROUPS["standard"] + tasks.GROUPS["literature"] == tasks.TASKS


# ---------------------------------------------------------------------- data --

def check_binary(tree, typed):
    if not isinstance(tree, tuple):
        assert isinstance(tree, int)
        return
    if typed:
        kind, left, right = tree
        assert kind in range(data.N_NODE_TYPES)
    else:
        left, right = tree
    check_binary(left, typed)
    check_binary(right, typed)


def test_typed_trees_are_binary_with_types_over_the_same_sentences():
    typed = data.typed_tree_instances(50, seed=4)
    plain = data.tree_instances(50, seed=4)
    kinds = []

    def collect(t):
        if isinstance(t, tuple):
            kinds.append(t[0])
            collect(t[1])
            collect(t[2])
    for (tree, label), (plain_tree, plain_label) in zip(typed, plain):
        check_binary(tree, typed=True)
        assert data.leaves(tree) == data.leaves(plain_tree) and label == plain_label
        collect(tree)
    assert set(kinds) == set(range(data.N_NODE_TYPES))      # both compositions are used
    assert data.typed_tree_instances(50, seed=4) == typed          # seeded, no state


def test_mvrnn_trees_use_the_matrix_vocabulary():
    _, inst = data.make("mvrnn", 40, seed=2)
    for tree, _ in inst:
        check_binary(tree, typed=False)
        assert all(0 <= w < tree_tasks.MVRNN.vocab for w in data.leaves(tree))


def brute_force_matches(lex, chars):
    return tuple((s, e, lex.index[tuple(chars[s:e])])
                 for e in range(len(chars) + 1) for s in range(e)
                 if tuple(chars[s:e]) in lex.index)


def test_lattice_words_span_their_characters():
    inst = data.lattice_instances(120, seed=5)
    lex = data.Lexicon(np.random.default_rng([5, 6]))      # the generator's lexicon
    n_chars = n_words = 0
    lengths = set()
    for chars, tags, words in inst:
        assert len(tags) == len(chars) >= 2
        assert all(0 <= c < data.N_LATTICE_CHARS for c in chars)
        assert all(0 <= t < data.N_TAGS for t in tags)
        # every match is a lexicon word spelled by exactly those characters, and every
        # lexicon word in the sentence is matched (ordered by end, then start)
        assert words == brute_force_matches(lex, chars)
        for start, end, k in words:
            assert lex.spelling[k] == tuple(chars[start:end])
            lengths.add(end - start)
        n_chars += len(chars)
        n_words += len(words)
    assert lengths == set(data.WORD_LENGTHS)
    assert 0.5 <= n_words / n_chars <= 1.0          # Chinese NER lattices' density
    assert data.lattice_instances(120, seed=5) == inst != data.lattice_instances(120, seed=6)


def test_lattice_arcs_follow_the_nodes():
    chars, _, words = data.lattice_instances(10, seed=6)[3]
    arcs = lattice_tasks.arcs((chars, None, words))
    assert [a[1] for a in arcs] == sorted(a[1] for a in arcs)         # by target node
    assert sum(not a[2] for a in arcs) == len(chars)                  # one per character
    assert all(a[0] < a[1] for a in arcs)
    assert sorted((a[0], a[1], a[3]) for a in arcs if a[2]) == sorted(words)


def test_sentence_pairs_are_correlated():
    pairs = data.nmt_instances(1500, seed=7)
    src = np.array([len(s) for s, _ in pairs])
    tgt = np.array([len(t) for _, t in pairs])
    assert 20 <= src.mean() <= 25 and 20 <= tgt.mean() <= 25
    assert np.corrcoef(src, tgt)[0, 1] > 0.8
    assert min(min(s) for s, _ in pairs) >= 1 and min(min(t) for _, t in pairs) >= 1   # 0 is <s>
    assert data.nmt_instances(1500, seed=7) == pairs != data.nmt_instances(1500, seed=8)


# --------------------------------------------------------------------- DyNet --

def test_dynet_runs_every_workload():
    exe = dynet_python()
    if exe is None:
        pytest.skip("no interpreter with DyNet (set AUTOBATCH_DYNET_PYTHON)")
    meta = run.main(["--task", ",".join(WORKLOADS), "--strategy", "agenda", "--variant", "ops",
                     "--batch-size", "2", "--hidden", "6", "--steps", "1", "--no-torch",
                     "--quiet", "--dynet-python", exe])
    rows = {(r["task"], r["system"]): r for r in meta["rows"]}
    for t in WORKLOADS:
        ours, theirs = rows[(t, "agenda")], rows[(t, "dynet-agenda")]
        # the same initial values and model code: the same losses before and after a step
        assert theirs["losses"] == pytest.approx(ours["losses"], rel=1e-4), t
