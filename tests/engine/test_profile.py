"""The profile timers (dy.set_profiling) and the operand counts of stats(): off by
default, the parts add up to the graph's timings, products are counted as gemm calls,
operands that are not contiguous are gathered (and counted), those that are are used
in place; the bench's --profile view prints the split."""
import io

import numpy as np
import pytest

import autobatch as dy
from autobatch.bench import run


@pytest.fixture(autouse=True)
def profiling_off_after():
    yield
    dy.set_profiling(False)


def mlp_step(n=4, aligned=False, strategy="agenda"):
    """n instances of tanh(W x + b) -> squared norm; x = tanh(input), all computed in
    one batch (contiguous), or with aligned False the ends of chains of different
    lengths (spread over several batches)."""
    pc = dy.ParameterCollection(seed=2)
    W = pc.add_parameters((5, 3))
    b = pc.add_parameters(5)
    dy.renew_cg(strategy=strategy)
    losses = []
    for i in range(n):
        x = dy.inputVector(np.arange(3, dtype=np.float32) + i)
        for _ in range(1 if aligned else i + 1):
            x = dy.tanh(x)
        losses.append(dy.squared_norm(dy.tanh(W * x + b)))
    loss = dy.esum(losses)
    loss.value()
    loss.backward()
    return dy.cg().stats()


def test_off_by_default():
    assert not dy.profiling()
    st = mlp_step()
    assert "profile" not in st


def test_parts_add_up():
    dy.set_profiling(True)
    assert dy.profiling()
    st = mlp_step()
    p, s = st["profile"], st["seconds"]
    parts = sum(p[k] for k in ("build", "schedule", "engine", "memory", "gather", "gemm", "kernels"))
    assert parts == pytest.approx(s["build"] + s["schedule"] + s["forward"] + s["backward"],
                                  rel=1e-9, abs=1e-12)
    assert all(p[k] >= 0 for k in ("gemm", "gather", "memory", "schedule", "build"))
    # one product batch: forward W x, backward dx (W's gradient is postponed: one more)
    assert p["gemm_calls"] >= 2
    assert p["kernel_calls"] >= st["batches"]


def test_renewed_graph_follows_the_switch():
    dy.set_profiling(True)
    assert "profile" in mlp_step()
    dy.set_profiling(False)
    assert "profile" not in mlp_step()


def test_operands_in_place_or_copied():
    # the x of the product batch are the outputs of one batch: used in place
    st = mlp_step(aligned=True)
    assert st["operands"]["in_place"] >= 1 and st["operands"]["copied"] == 0
    assert st["operands"]["copied_floats"] == 0
    # chains of different lengths: the x of the product batch lie in different batches
    dy.set_profiling(True)
    st = mlp_step(aligned=False)
    assert st["operands"]["copied"] >= 1
    assert st["operands"]["copied_floats"] >= 4 * 3
    assert st["profile"]["gather_calls"] >= 1


def test_unbatched_strategy_counts_single_operands_in_place():
    st = mlp_step(strategy="none")
    assert st["operands"]["copied"] == 0
    assert st["operands"]["in_place"] >= 4


def test_bench_profile_view():
    meta = run.main(["--task", "treelstm", "--strategy", "agenda,lookahead", "--variant", "ops",
                     "--batch-size", "2", "--hidden", "8", "--steps", "1", "--no-torch",
                     "--quiet", "--profile"])
    buf = io.StringIO()
    run.profile_table(meta["rows"], out=buf)
    out = buf.getvalue()
    assert "profile: ms per step" in out and "gemm" in out and "lookahead" in out
    for r in meta["rows"]:
        assert set(r["profile_s"]) == set(run.PROFILE_PARTS)
        assert r["profile_s"]["gemm"] > 0
    assert not dy.profiling() or meta["profile"]
