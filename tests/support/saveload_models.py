"""Shared by tests/io/test_saveload.py and tests/io/test_saveload_refusals.py: a small
collection to save (`build`), its values, a registered savable object (`Affine`) and
the check that a refused load changed nothing."""
import autobatch as dy


def build(seed):
    pc = dy.ParameterCollection(seed=seed)
    W = pc.add_parameters((3, 4), name="W")
    b = pc.add_parameters(3, name="b")
    E = pc.add_lookup_parameters((10, 4), name="E")
    sub = pc.add_subcollection("enc")
    V = sub.add_parameters((4, 4))
    return pc, [W, b, E, V]


def values(params):
    return [p.as_array() for p in params]


@dy.register_savable
class Affine:
    """A builder-like object: param_collection(), spec, from_spec; registered."""

    def __init__(self, n_in, n_out, model, act="tanh"):
        self.spec = (n_in, n_out, {"act": act})
        self.pc = model.add_subcollection("affine")
        self.W = self.pc.add_parameters((n_out, n_in), name="W")
        self.b = self.pc.add_parameters(n_out, name="b")

    @classmethod
    def from_spec(cls, spec, model):
        n_in, n_out, opts = spec
        return cls(n_in, n_out, model, **opts)

    def param_collection(self):
        return self.pc


def check_unchanged(pc2, before):
    for a, b in zip(values(pc2.parameters_list() + pc2.lookup_parameters_list()), before):
        assert a.tobytes() == b.tobytes()
