"""autobatch.distributed: one process without mpiexec, and real two-rank runs.

The two-rank tests launch `mpiexec -n 2 python tests/support/distributed_worker.py` in a
subprocess with a timeout. mpi4py and the mpich wheel (which provides mpiexec) are in
the test extra, so they run wherever the README's test command was used; elsewhere they
are skipped with the reason, and under CI (CI=true) a missing mpiexec is a failure.
"""
import importlib.util
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import autobatch as dy
from autobatch import distributed as dist

TESTS = pathlib.Path(__file__).resolve().parents[1]          # tests/
SUPPORT = TESTS / "support"
LAUNCH_TIMEOUT = 120        # seconds for one mpiexec run; the runs take about 1-5 s


def load_worker():
    spec = importlib.util.spec_from_file_location("distributed_worker", SUPPORT / "distributed_worker.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


worker = load_worker()


def mpiexec():
    path = dist.find_mpiexec()
    mpi4py = importlib.util.find_spec("mpi4py") is not None
    if path and mpi4py:
        return path
    missing = "mpiexec" if not path else "mpi4py"
    reason = f"{missing} is not installed: pip install '.[test]' (or 'autobatch[mpi]') brings mpi4py and mpich"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI installs the test extra, so this is a broken install")
    pytest.skip(reason)


def launch(out, args, n=2, script=SUPPORT / "distributed_worker.py"):
    """Run `script` with `args` (the worker: its output directory and a mode) on n
    ranks, from `out` (outside the source tree) with this test's autobatch on the path;
    returns (CompletedProcess, seconds)."""
    package_root = pathlib.Path(dy.__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(package_root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    if isinstance(args, str):
        args = [str(out), args]
    cmd = [mpiexec(), "-n", str(n), sys.executable, str(script)] + args
    t0 = time.monotonic()
    # a session of its own, so that a timeout ends mpiexec and every rank it started
    with subprocess.Popen(cmd, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=LAUNCH_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            pytest.fail(f"{' '.join(cmd)} did not end in {LAUNCH_TIMEOUT} s:\n{stdout}\n{stderr}")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr), time.monotonic() - t0


# ---------------------------------------------------------- one process ----

def test_importing_autobatch_needs_no_mpi():
    code = "import sys, autobatch as dy; dy.distributed.wrap; assert 'mpi4py' not in sys.modules"
    package_root = pathlib.Path(dy.__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(package_root)), cwd=TESTS.parent.parent)
    assert proc.returncode == 0, proc.stderr


def test_one_process_without_mpiexec():
    assert dist.init() == 1
    assert (dist.rank(), dist.size(), dist.is_main()) == (0, 1, True)
    dist.barrier()
    assert dist.allreduce_mean(2.5) == 2.5
    np.testing.assert_array_equal(dist.allreduce_mean(np.array([1.0, 3.0]), weight=4), [1.0, 3.0])


def test_shard_of_one_process_is_the_seeded_permutation():
    data = list(range(50))
    assert dist.shard(data, epoch=3, seed=9) == np.random.default_rng([9, 3]).permutation(50).tolist()
    assert dist.shard(data, epoch=3, seed=9) == dist.shard(data, epoch=3, seed=9)
    assert dist.shard(data, epoch=4, seed=9) != dist.shard(data, epoch=3, seed=9)
    assert dist.shard(data, shuffle=False) == data


def test_wrapped_trainer_of_one_process_is_the_trainer():
    data = worker.corpus(8)
    cfg = worker.CONFIGS["adam-sum-agenda"]
    plain, wrapped = worker.Model(seed=1), worker.Model(seed=1)
    t_plain = worker.make_trainer(cfg, plain.pc)
    t_wrapped = dist.wrap(worker.make_trainer(cfg, wrapped.pc), reduce="sum")
    for model, trainer in ((plain, t_plain), (wrapped, t_wrapped)):
        worker.step(model, trainer, data, cfg)
    for name, value in plain.values().items():
        np.testing.assert_array_equal(wrapped.values()[name], value, err_msg=name)
    t_wrapped.learning_rate = 0.5                 # settings are the wrapped trainer's
    assert t_wrapped.trainer.learning_rate == 0.5 and t_wrapped.updates == 1


TRAINER_CLASSES = sorted({c for c in vars(dy).values()
                          if isinstance(c, type) and issubclass(c, dy.Trainer) and c is not dy.Trainer},
                         key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", TRAINER_CLASSES, ids=lambda c: c.__name__)
def test_every_method_of_a_wrapped_trainer_combines_first_or_is_refused(cls):
    """The wrapper's own update() and update_subset() combine the gradients; of the
    wrapped trainer's other methods only the audited ones (PASSED_ON, none of which
    steps) are passed on: any other, the private _update included, would step without
    combining, and is refused with a message saying what to call."""
    wrapped = dist.wrap(cls(dy.ParameterCollection()))
    methods = [n for n in dir(wrapped.trainer) if callable(getattr(wrapped.trainer, n))
               and not (n.startswith("__") and n.endswith("__"))]
    assert {"update", "update_subset", "_update"} <= set(methods)
    for name in methods:
        if name in ("update", "update_subset"):
            assert getattr(type(wrapped), name) is not getattr(cls, name), name     # the wrapper's own
        elif name in dist.trainer.PASSED_ON:
            assert getattr(wrapped, name) == getattr(wrapped.trainer, name)
        else:
            with pytest.raises(AttributeError, match=f"does not pass on {name} of the wrapped {cls.__name__}"):
                getattr(wrapped, name)
    assert wrapped.learning_rate == wrapped.trainer.learning_rate      # attributes still pass
    assert wrapped.updates == 0 and wrapped.model is wrapped.trainer.model


def test_the_methods_passed_on_step_nothing():
    model = worker.Model(seed=1)
    wrapped = dist.wrap(dy.AdamTrainer(model.pc))
    dy.renew_cg()
    model.loss([1, 2], [0, 1]).backward()
    wrapped.update()                                 # some optimizer state, then new gradients
    dy.renew_cg()
    model.loss([3], [2]).backward()
    ps = model.pc.parameters_list() + model.pc.lookup_parameters_list()
    before = [(p.as_array().copy(), p.grad_as_array().copy()) for p in ps]
    wrapped.set_clip_threshold(2.0), wrapped.get_clip_threshold(), wrapped.set_sparse_updates(True)
    wrapped.set_learning_rate(0.5), wrapped.restart(), wrapped.status()
    with pytest.warns(DeprecationWarning):
        wrapped.update_epoch()
    wrapped.rule(np.zeros(2, np.float32), np.ones(2, np.float32), 1, np.zeros(2, np.float32),
                 np.zeros(2, np.float32))
    assert set(dist.trainer.PASSED_ON) == {"set_clip_threshold", "get_clip_threshold", "set_sparse_updates",
                                           "set_learning_rate", "restart", "status", "update_epoch", "rule"}
    for p, (value, grad) in zip(ps, before):
        np.testing.assert_array_equal(p.as_array(), value)
        np.testing.assert_array_equal(p.grad_as_array(), grad)
    assert wrapped.updates == 1


def test_update_subset_of_one_process_is_the_trainers():
    initial, plain, wrapped = worker.Model(seed=1).values(), worker.Model(seed=1), worker.Model(seed=1)
    t_plain, t_wrapped = dy.SimpleSGDTrainer(plain.pc), dist.wrap(dy.SimpleSGDTrainer(wrapped.pc))
    for model, trainer in ((plain, t_plain), (wrapped, t_wrapped)):
        dy.renew_cg()
        model.loss([1, 2], [0, 1]).backward()
        trainer.update_subset(iter(worker.subset_indices(model)[0]), (0,))
    moved = {name for name, value in plain.values().items() if not np.array_equal(value, initial[name])}
    assert moved == {plain.W.name().strip("/"), plain.b.name().strip("/"), plain.E.name().strip("/")}
    for name, value in plain.values().items():
        np.testing.assert_array_equal(wrapped.values()[name], value, err_msg=name)
    assert t_wrapped.updates == 1
    with pytest.raises(TypeError, match="update_subset: updated_params must be a list of ints"):
        t_wrapped.update_subset([0.0], [])


def test_wrapper_rejects_an_unknown_reduction():
    with pytest.raises(ValueError, match="reduce must be 'mean' or 'sum'"):
        dist.DistributedTrainer(dy.SimpleSGDTrainer(dy.ParameterCollection()), reduce="max")


# -------------------------------------------------------------- two ranks ----

def finished_run(tmp_path_factory, folder, mode):
    """The folder of a two-rank run of the worker's `mode`, which must exit cleanly."""
    out = tmp_path_factory.mktemp(folder)
    proc, _ = launch(out, mode)
    assert proc.returncode == 0, f"mpiexec failed:\n{proc.stdout}\n{proc.stderr}"
    return out


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory):
    return finished_run(tmp_path_factory, "two_ranks", "train")


def reference(cfg, data):
    """One process, the plain trainer, minibatch BATCH, the permutation shard() uses."""
    model = worker.Model(seed=worker.SEED)
    initial = model.values()
    trainer = worker.make_trainer(cfg, model.pc)
    order = dist.shard(data, epoch=0, seed=worker.SEED)          # size 1: the whole permutation
    for s in range(worker.STEPS):
        worker.step(model, trainer, order[s * worker.BATCH:(s + 1) * worker.BATCH], cfg)
    return initial, model.values(), trainer


@pytest.mark.parametrize("config", sorted(worker.CONFIGS))
def test_two_ranks_with_half_minibatches_match_one_process(two_rank_run, config):
    cfg = worker.CONFIGS[config]
    ranks = [np.load(two_rank_run / f"{config}-rank{r}.npz") for r in range(2)]
    initial, expected, trainer = reference(cfg, worker.corpus())
    if cfg["clip"]:
        assert trainer.clips > 0, "the test should exercise clipping on the global norm"
    for name, want in expected.items():
        for r in range(2):
            got = ranks[r][name]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{config} rank {r} {name}")
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name], err_msg="ranks differ: " + name)
        moved = np.abs(want - initial[name]).max()
        assert moved > 1e-4, f"{config}: {name} moved only {moved} in {worker.STEPS} steps"


def test_sparse_updates_send_and_change_only_touched_rows(two_rank_run):
    config = "adam-sum-agenda"
    E_name = worker.Model(seed=0).E.name().strip("/")
    initial = worker.Model(seed=worker.SEED).values()[E_name]
    for r in range(2):
        info = json.loads((two_rank_run / f"{config}-rank{r}.json").read_text())
        assert info["size"] == 2
        assert info["reduced"] == pytest.approx([3, 2, 1, 2 / 3])   # sum, max, min, weighted mean
        assert info["rows_sent"] == info["rows_used"]              # each rank sends its rows only
        E = np.load(two_rank_run / f"{config}-rank{r}.npz")[E_name]
        np.testing.assert_array_equal(E[worker.USED_WORDS:], initial[worker.USED_WORDS:])
        assert info["last_step"]["dense_bytes"] > 0 and info["last_step"]["collectives"] == 4


def test_dense_gradients_travel_in_buffers_of_the_size_asked():
    model = worker.Model(seed=0)
    sizes = [p._grad_flat.size for p in model.pc.parameters_list()]
    buffers = dist.collectives._buckets([p._grad_flat for p in model.pc.parameters_list()], 4 * 100)
    assert [b[0].size for b in buffers] and sum(b[0].size for b in buffers) == sum(sizes)
    for buf, group, pairs in buffers:          # at most 100 floats, or one larger array alone
        assert buf.size <= 100 or len(group) == 1
        assert all(view.base is buf or view.base is buf.base for _, view in pairs)


def test_several_dense_buffers_combine_like_one(two_rank_run):
    one = json.loads((two_rank_run / "adam-sum-agenda-rank0.json").read_text())["last_step"]
    many = json.loads((two_rank_run / "sgd-mean-depth-rank0.json").read_text())["last_step"]
    assert one["collectives"] == 1 + 3                  # one Allreduce, three for the sparse rows
    assert many["collectives"] > 3 and many["sparse_bytes_sent"] == 0   # dense lookup updates


def test_shards_interleave_into_the_one_process_order(two_rank_run):
    data = worker.corpus()
    parts = [json.loads((two_rank_run / f"adam-sum-agenda-rank{r}.json").read_text())["parts"]
             for r in range(2)]
    order = [[list(w), list(t)] for w, t in dist.shard(data, epoch=0, seed=worker.SEED)]
    assert [x for step in zip(*parts) for pair in zip(*step) for x in pair] == order[:worker.BATCH * worker.STEPS]


def test_balanced_parts_make_up_the_one_process_minibatches(two_rank_run):
    data = worker.corpus()
    parts = [json.loads((two_rank_run / f"momentum-sum-none-rank{r}.json").read_text())["parts"]
             for r in range(2)]
    order = [[list(w), list(t)] for w, t in dist.shard(data, epoch=0, seed=worker.SEED)]
    for s, (a, b) in enumerate(zip(*parts)):
        batch = order[s * worker.BATCH:(s + 1) * worker.BATCH]
        assert len(a) == len(b) == worker.BATCH // 2
        assert sorted(a + b) == sorted(batch)
        words = [sum(len(w) for w, _ in part) for part in (a, b)]
        strided = [sum(len(w) for w, _ in batch[r::2]) for r in range(2)]
        assert abs(words[0] - words[1]) <= max(abs(strided[0] - strided[1]), max(len(w) for w, _ in batch))


def test_split_batch_of_one_process_is_the_batch():
    assert dist.split_batch([5, 1, 4], cost=lambda x: x) == [5, 1, 4]
    assert list(dist.minibatches(list(range(7)), 3, epoch=2, seed=1)) == [
        list(dist.shard(list(range(7)), epoch=2, seed=1))[k:k + 3] for k in (0, 3, 6)]


def test_saved_by_rank_0_loaded_by_all_or_broadcast(two_rank_run):
    expected = list(worker.Model(seed=worker.SEED).values().values())     # rank 0's model
    for r in range(2):
        for what in ("loaded", "populated"):          # populated on rank 0, then broadcast
            loaded = np.load(two_rank_run / f"{what}-rank{r}.npz")
            assert len(loaded.files) == len(expected)
            for i, want in enumerate(expected):
                np.testing.assert_array_equal(loaded[f"arr_{i}"], want, err_msg=f"{what} rank {r}")


def test_distributed_tagger_example_trains_as_one_process(tmp_path):
    example = TESTS.parent / "examples" / "distributed_tagger.py"
    args = ["--epochs", "2", "--n-train", "64", "--n-dev", "16", "--batch-size", "16",
            "--hidden", "16", "--word-dim", "16"]
    proc, _ = launch(tmp_path, args, script=example)
    assert proc.returncode == 0, proc.stderr
    spec = importlib.util.spec_from_file_location("distributed_tagger", example)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    one = module.main(args)                                               # this process: size 1
    lines = proc.stdout.splitlines()
    two = [float(line.split("loss per token ")[1].split()[0]) for line in lines if line.startswith("epoch")]
    assert two == pytest.approx(one["losses"], abs=2e-4), proc.stdout       # printed to 4 decimals
    assert f"held-out tag accuracy: {one['accuracy']:.3f}" in lines, proc.stdout
    assert one["losses"][-1] < one["losses"][0]


def test_an_exception_on_one_rank_aborts_the_job(tmp_path):
    proc, seconds = launch(tmp_path, "raise")
    assert proc.returncode != 0
    assert "ValueError: injected fault on purpose" in proc.stderr
    assert "autobatch.distributed: rank 1 of 2: failed with ValueError" in proc.stderr, proc.stderr
    assert seconds < 60


def test_a_rank_that_stops_early_is_caught_by_the_timeout(tmp_path):
    proc, seconds = launch(tmp_path, "short")
    assert proc.returncode != 0
    assert "rank 0 of 2: waited more than 3 s in Allreduce" in proc.stderr, proc.stderr
    assert seconds < 60


def test_ranks_whose_parameters_differ_in_shape_abort_naming_both_shapes(tmp_path):
    """W of (3, 4) on rank 0, (4, 3) on rank 1: as many floats, but not the same model."""
    proc, seconds = launch(tmp_path, "shapes")
    assert proc.returncode != 0
    assert ("rank 0 has parameter /W of shape (3, 4), rank 1 has parameter /W of shape (4, 3)"
            in proc.stderr), proc.stderr
    assert "rank 1 of 2: failed with ValueError: the ranks' parameters differ" in proc.stderr
    assert seconds < 60


@pytest.fixture(scope="module")
def mismatch_run(tmp_path_factory):
    return finished_run(tmp_path_factory, "mismatch", "mismatch")


# what each case of worker.MISMATCHES must say, on both ranks
REFUSALS = {
    "dense-transposed": "parameters differ: at #0 rank 0 has parameter /W of shape (3, 4), "
                        "rank 1 has parameter /W of shape (4, 3)",
    "lookup-reshaped": "parameters differ: at #1 rank 0 has lookup table /_1 of shape (10, 6), "
                       "rank 1 has lookup table /_1 of shape (20, 3)",
    "renamed": "parameters differ: at #1 rank 0 has parameter /b of shape (2,), rank 1 has parameter /c",
    "extra-parameter": "gradients differ (rank 0 has 1, rank 1 has 2): at #1 rank 0 has nothing, "
                       "rank 1 has parameter /_1 of shape (1,)",
    "gradients-transposed": "gradients differ: at #0 rank 0 has parameter /_0 of shape (2, 3), "
                            "rank 1 has parameter /_0 of shape (3, 2)",
    "sparse-on-one-rank": "gradients differ: at #1 rank 0 has lookup table (sparse rows) /_1 of shape (5, 2), "
                          "rank 1 has lookup table /_1 of shape (5, 2)",
    "subset-differs": "gradients differ: at #0 rank 0 has parameter /_0 of shape (2,), "
                      "rank 1 has parameter /_1 of shape (2,)",
}


def test_every_mismatch_case_has_its_refusal():
    assert set(REFUSALS) == set(worker.MISMATCHES)


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_ranks_whose_models_differ_are_refused_before_values_travel(mismatch_run, case):
    for r in range(2):
        refused = json.loads((mismatch_run / f"mismatch-rank{r}.json").read_text())[case]
        assert refused is not None, f"{case}: rank {r} went on"
        assert refused[0] == "ValueError" and REFUSALS[case] in refused[1], refused


def test_update_subset_combines_the_listed_gradients_and_keeps_the_others(mismatch_run):
    """Step 1 ends in update_subset (W, b, E), step 2 in update(). Two ranks with half
    minibatches and reduce="sum" must match one process: the LSTM's gradients of step 1
    wait, on each rank alone, and are combined once, in step 2 (combined in step 1 too,
    they would count twice)."""
    cfg = worker.CONFIGS["adam-sum-agenda"]
    order = dist.shard(worker.corpus(), epoch=0, seed=worker.SEED)      # size 1: the whole permutation
    B = worker.BATCH
    initial = worker.Model(seed=worker.SEED).values()
    expected = worker.train_with_subsets([order[:B], order[B:2 * B]], cfg).values()
    ranks = [np.load(mismatch_run / f"subset-rank{r}.npz") for r in range(2)]
    for name, want in expected.items():
        assert np.abs(want - initial[name]).max() > 1e-4, f"{name} did not move"
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name], err_msg="ranks differ: " + name)
        np.testing.assert_allclose(ranks[0][name], want, rtol=1e-5, atol=1e-6, err_msg=name)


def test_scaling_bench_runs_every_setup_on_the_same_data(capsys):
    mpiexec()                                              # skips (or fails under CI) without MPI
    from autobatch.bench import scaling
    rows = scaling.main(["--task", "tagger,treelstm", "--batch-size", "4", "--hidden", "8",
                         "--steps", "1", "--rounds", "1", "--timeout", str(LAUNCH_TIMEOUT)])
    assert [r["task"] for r in rows] == ["tagger", "treelstm"]
    for row in rows:
        first = row["1proc"]["first_loss"]
        assert first > 0
        for setup in ("2proc", "1proc-2blas"):
            assert row[setup]["first_loss"] == pytest.approx(first, rel=1e-5), (row["task"], setup)
            assert row[setup + "_over_1proc"] > 0
        assert row["2proc"]["sent_bytes"] > 0 and row["1proc"]["sent_bytes"] == 0
    assert "2p/1p" in capsys.readouterr().out


def test_ranks_on_one_node_share_its_cores(tmp_path, monkeypatch):
    """Two ranks started by mpiexec on this machine: each takes cores / 2 engine threads
    (at least one) by default, unless its launcher bound it to cores of its own."""
    monkeypatch.delenv("AUTOBATCH_NUM_THREADS", raising=False)
    script = tmp_path / "threads.py"
    script.write_text("import os, autobatch as dy\n"
                      "cores = len(os.sched_getaffinity(0))\n"
                      "print(dy.get_num_threads(), cores, os.cpu_count(), "
                      "repr(dy.config_info()['threads_reason']), flush=True)\n")
    proc, _ = launch(tmp_path, [], script=script)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2
    for line in lines:
        threads, cores, machine, why = line.split(" ", 3)
        if int(cores) >= int(machine):          # not bound: the node's cores shared out
            assert int(threads) == max(1, int(cores) // 2), line
            assert "shared by 2 MPI ranks" in why
        else:                                   # bound by the launcher: its own cores
            assert int(threads) == int(cores), line
