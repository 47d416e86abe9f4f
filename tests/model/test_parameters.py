"""ParameterCollection naming/hierarchy, Parameters methods, initializers, seeding."""
import numpy as np
import pytest

import autobatch as dy


def test_default_and_given_names_follow_dynet():
    pc = dy.ParameterCollection()
    assert pc.name() == "/"
    names = [pc.add_parameters(2).name(), pc.add_parameters(2, name="W").name(),
             pc.add_parameters(2, name="W").name(), pc.add_lookup_parameters((3, 2)).name(),
             pc.add_lookup_parameters((3, 2), name="E").name()]
    assert names == ["/_0", "/W", "/W_1", "/_1", "/E"]
    enc, enc2, anon = pc.add_subcollection("enc"), pc.add_subcollection("enc"), pc.add_subcollection()
    assert (enc.name(), enc2.name(), anon.name()) == ("/enc/", "/enc_1/", "/_0/")
    inner = enc.add_subcollection("inner")
    assert inner.add_parameters(1, name="b").name() == "/enc/inner/b"


@pytest.mark.parametrize("bad", ["a/b", "W_1", "x_"])
def test_invalid_names_rejected(bad):
    pc = dy.ParameterCollection()
    with pytest.raises(ValueError):
        pc.add_parameters(2, name=bad)
    with pytest.raises(ValueError):
        pc.add_subcollection(bad)


def test_lists_include_subcollections_in_creation_order():
    pc = dy.ParameterCollection()
    a = pc.add_parameters(2)
    sub = pc.add_subcollection("s")
    b = sub.add_parameters(2)
    E = sub.add_lookup_parameters((4, 2))
    c = pc.add_parameters(2)
    subsub = sub.add_subcollection("t")
    d = subsub.add_parameters(2)
    assert pc.parameters_list() == [a, b, c, d]
    assert sub.parameters_list() == [b, d]
    assert subsub.parameters_list() == [d]
    assert pc.lookup_parameters_list() == [E] and sub.lookup_parameters_list() == [E]
    assert subsub.lookup_parameters_list() == []
    assert pc.parameter_count() == 2 * 4 + 8


def test_parameter_methods():
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((2, 3), name="W")
    assert W.shape() == (2, 3) and W.name() == "/W"
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    W.set_value(v)
    np.testing.assert_array_equal(W.as_array(), v)
    np.testing.assert_array_equal(W._flat, v.flatten(order="F"))   # column-major storage
    W.scale(2.0)
    np.testing.assert_array_equal(W.as_array(), 2 * v)
    W.grad[...] = 1.0
    np.testing.assert_array_equal(W.grad_as_array(), np.ones((2, 3)))
    W.zero()
    assert not W.as_array().any()
    assert W.is_updated()
    W.set_updated(False)
    assert not W.is_updated()
    with pytest.raises(ValueError):
        W.set_value(np.zeros((3, 3)))


def test_lookup_methods():
    pc = dy.ParameterCollection(seed=0)
    E = pc.add_lookup_parameters((5, 3))
    assert E.shape() == (5, 3)
    E.init_row(2, [1, 2, 3])
    np.testing.assert_array_equal(E.as_array()[2], [1, 2, 3])
    arr = np.arange(15, dtype=np.float32).reshape(5, 3)
    E.init_from_array(arr)
    np.testing.assert_array_equal(E.as_array(), arr)
    E.scale(0.5)
    np.testing.assert_array_equal(E.as_array(), arr / 2)
    E.zero()
    assert not E.as_array().any()
    with pytest.raises(IndexError):
        E.init_row(5, [0, 0, 0])


def _bound(x):
    return np.abs(x).max()


def test_glorot_scales():
    pc = dy.ParameterCollection(seed=0)
    M = pc.add_parameters((200, 300)).as_array()
    s = np.sqrt(6 / 500)
    assert _bound(M) <= s and _bound(M) > 0.99 * s
    assert M.var() == pytest.approx(s * s / 3, rel=0.02)
    # DyNet's scale is sqrt(3 k / sum(dims)) over k dims (measured with dynet38)
    v = pc.add_parameters(5000).as_array()
    assert 0.99 * np.sqrt(3 / 5000) < _bound(v) <= np.sqrt(3 / 5000)
    t = pc.add_parameters((30, 40, 50)).as_array()
    assert 0.99 * np.sqrt(9 / 120) < _bound(t) <= np.sqrt(9 / 120)
    # a 4-d filter (H, W, In, Out): fans (In + Out) * H * W, as DyNet's conv filters
    f = pc.add_parameters((3, 3, 8, 16), init=dy.GlorotInitializer(gain=2.0)).as_array()
    assert 0.99 * 2 * np.sqrt(6 / 216) < _bound(f) <= 2 * np.sqrt(6 / 216)
    f = pc.add_parameters((5, 5, 1, 32)).as_array()
    assert 0.99 * np.sqrt(6 / 825) < _bound(f) <= np.sqrt(6 / 825)
    g = pc.add_parameters((100, 100), init=dy.GlorotInitializer(gain=4.0)).as_array()
    assert 0.99 * 4 * np.sqrt(6 / 200) < _bound(g) <= 4 * np.sqrt(6 / 200)
    # lookup tables: DyNet Python's default GlorotInitializer() sums dim + rows
    E = pc.add_lookup_parameters((1000, 50)).as_array()
    assert 0.99 * np.sqrt(6 / 1050) < _bound(E) <= np.sqrt(6 / 1050)
    E = pc.add_lookup_parameters((1000, 50), init=dy.GlorotInitializer(is_lookup=True)).as_array()
    assert 0.99 * np.sqrt(3 / 50) < _bound(E) <= np.sqrt(3 / 50)
    E = pc.add_lookup_parameters((100, 3, 4), init=dy.GlorotInitializer(is_lookup=True)).as_array()
    assert 0.99 * np.sqrt(6 / 7) < _bound(E) <= np.sqrt(6 / 7)
    E = pc.add_lookup_parameters((100, 3, 4)).as_array()
    assert 0.98 * np.sqrt(9 / 107) < _bound(E) <= np.sqrt(9 / 107)


def test_other_initializers():
    pc = dy.ParameterCollection(seed=0)
    n = pc.add_parameters((200, 200), init=dy.NormalInitializer(mean=1.0, var=4.0)).as_array()
    assert n.mean() == pytest.approx(1.0, abs=0.05) and n.var() == pytest.approx(4.0, rel=0.03)
    u = pc.add_parameters((200, 200), init=dy.UniformInitializer(0.3)).as_array()
    assert 0.299 < _bound(u) <= 0.3 and u.mean() == pytest.approx(0, abs=0.01)
    assert (pc.add_parameters(4, init=dy.ConstInitializer(2.5)).as_array() == 2.5).all()
    assert (pc.add_parameters(4, init=7).as_array() == 7).all()
    np.testing.assert_array_equal(pc.add_parameters((3, 3), init=dy.IdentityInitializer()).as_array(), np.eye(3))
    with pytest.raises(ValueError):
        pc.add_parameters((2, 3), init=dy.IdentityInitializer())
    q = pc.add_parameters((6, 6), init=dy.SaxeInitializer(scale=2.0)).as_array()
    np.testing.assert_allclose(q.T @ q, 4 * np.eye(6), atol=1e-5)
    r = pc.add_parameters((6, 3), init=dy.SaxeInitializer()).as_array()
    np.testing.assert_allclose(r.T @ r, np.eye(3), atol=1e-5)
    a = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(pc.add_parameters((2, 3), init=dy.NumpyInitializer(a)).as_array(), a)
    np.testing.assert_array_equal(pc.add_parameters((2, 3), init=a.astype(float)).as_array(), a)
    np.testing.assert_array_equal(pc.parameters_from_numpy(a).as_array(), a)
    np.testing.assert_array_equal(pc.add_lookup_parameters((2, 3), init=a.astype(float)).as_array(), a)
    with pytest.raises(ValueError):
        pc.add_parameters((3, 2), init=dy.NumpyInitializer(a))


def test_string_initializers():
    pc = dy.ParameterCollection(seed=0)
    u = pc.add_parameters((100, 100), init="uniform", scale=0.2).as_array()
    assert 0.199 < _bound(u) <= 0.2
    n = pc.add_parameters((200, 200), init="normal", mean=2.0, std=0.5).as_array()
    assert n.mean() == pytest.approx(2.0, abs=0.01) and n.std() == pytest.approx(0.5, rel=0.02)
    he = pc.add_parameters((200, 50), init="he").as_array()
    assert he.var() == pytest.approx(1 / 100, rel=0.05)
    np.testing.assert_array_equal(pc.add_parameters((2, 2), init="identity").as_array(), np.eye(2))
    with pytest.raises(ValueError):
        pc.add_parameters(3, init="nonsense")


def test_from_file_initializer(tmp_path):
    f = tmp_path / "vals.txt"
    f.write_text("1 2 3\n4 5 6\n")
    pc = dy.ParameterCollection()
    W = pc.add_parameters((2, 3), init=dy.FromFileInitializer(str(f)))
    np.testing.assert_array_equal(W.as_array(), np.array([[1, 3, 5], [2, 4, 6]]))  # column-major
    E = pc.add_lookup_parameters((2, 3), init=dy.FromFileInitializer(str(f)))
    np.testing.assert_array_equal(E.as_array(), [[1, 2, 3], [4, 5, 6]])            # row after row
    with pytest.raises(ValueError):
        pc.add_parameters((2, 2), init=dy.FromFileInitializer(str(f)))


def test_seed_makes_initialisation_reproducible():
    def build(seed):
        pc = dy.ParameterCollection(seed=seed)
        sub = pc.add_subcollection("s")
        return [pc.add_parameters((4, 5)).as_array(), sub.add_parameters(3).as_array(),
                pc.add_lookup_parameters((6, 2)).as_array()]
    for x, y in zip(build(7), build(7)):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(build(7)[0], build(8)[0])


def test_reset_random_seed_makes_unseeded_collections_reproducible():
    dy.reset_random_seed(123)
    a = dy.ParameterCollection().add_parameters((3, 3)).as_array()
    dy.reset_random_seed(123)
    b = dy.ParameterCollection().add_parameters((3, 3)).as_array()
    np.testing.assert_array_equal(a, b)


def test_weight_decay_setting():
    pc = dy.ParameterCollection()
    assert pc.get_weight_decay() == 0.0
    sub = pc.add_subcollection()
    pc.set_weight_decay(1e-3)
    assert sub.get_weight_decay() == pytest.approx(1e-3)      # inherited
    sub.set_weight_decay(0.0)
    assert sub.get_weight_decay() == 0.0 and pc.get_weight_decay() == pytest.approx(1e-3)
    with pytest.raises(ValueError):
        pc.set_weight_decay(-0.1)


def test_parameters_work_in_a_graph():
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((2, 3))
    x = np.array([1.0, -2.0, 0.5])
    dy.renew_cg()
    np.testing.assert_allclose((W * dy.inputVector(x.tolist())).npvalue(), W.as_array() @ x, rtol=1e-5)


def test_py_initializer_is_the_base_of_the_initializers():
    for init in (dy.GlorotInitializer(), dy.NormalInitializer(), dy.UniformInitializer(1),
                 dy.ConstInitializer(2), dy.IdentityInitializer(), dy.SaxeInitializer()):
        assert isinstance(init, dy.PyInitializer)
    with pytest.raises(TypeError, match="directly"):
        dy.PyInitializer()

    class Ramp(dy.PyInitializer):
        def __init__(self):
            pass

        def __call__(self, shape, rng, lookup=False):
            return np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    p = dy.ParameterCollection().add_parameters((2, 3), init=Ramp())
    np.testing.assert_array_equal(p.as_array(), np.arange(6).reshape(2, 3))
