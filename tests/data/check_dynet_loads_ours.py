"""DyNet (dynet38) reads the files autobatch writes in DyNet's format
(tests/data/dynet_model/ours*, made by `python tests/support/dynet_files.py`):

    /work/venv-dynet/bin/python tests/data/check_dynet_loads_ours.py

pc.populate of ours.model, Parameters.populate of ours_v.model, dy.load of
ours_saved.meta/.data and ours_saved2 (CompactVanillaLSTMBuilder, a layer-normalised
VanillaLSTMBuilder: its gains and biases, which DyNet's files cannot hold, are at
their initial values), ours_mlp (the saving tutorial's OneLayerMLP: DyNet finds the
class by the name the file gives, make_dynet_model_fixture.OneLayerMLP); values, W's gradient and every builder's outputs must equal
what autobatch computed (ours_expected.npz). Prints OK or raises."""
import os

import numpy as np

import dynet as dy
from make_dynet_model_fixture import HERE, OneLayerMLP, build, run

ex = np.load(os.path.join(HERE, "ours_expected.npz"))
pc = dy.ParameterCollection()
p = build(pc)
pc.populate(os.path.join(HERE, "ours.model"))
for k, v in p.items():
    np.testing.assert_array_equal(v.as_array(), ex[f"value_{k}"], err_msg=k)
np.testing.assert_array_equal(p["W"].grad_as_array(), ex["grad_W"])
p["V"].set_value(np.zeros((2, 2)))
p["V"].populate(os.path.join(HERE, "ours_v.model"), "/enc/V")
np.testing.assert_array_equal(p["V"].as_array(), ex["value_V"])

pc2 = dy.ParameterCollection()
W, E, vanilla, gru, simple, coupled, birnn = dy.load(os.path.join(HERE, "ours_saved"), pc2)
np.testing.assert_array_equal(W.as_array(), ex["value_W"])
np.testing.assert_array_equal(E.as_array(), ex["value_E"])
for name, b in [("vanilla", vanilla), ("gru", gru), ("simple", simple), ("coupled", coupled),
                ("birnn", birnn)]:
    np.testing.assert_allclose(run(b), ex[f"out_{name}"], rtol=1e-5, atol=1e-6, err_msg=name)
compact, layer_norm = dy.load(os.path.join(HERE, "ours_saved2"), pc2)
np.testing.assert_allclose(run(compact), ex["out_compact"], rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(run(layer_norm), ex["out_layer_norm"], rtol=1e-5, atol=1e-6)
mlp, E2 = dy.load(os.path.join(HERE, "ours_mlp"), pc2)    # a user's class, found by name
assert type(mlp) is OneLayerMLP and mlp.act is dy.rectify
dy.renew_cg()
np.testing.assert_allclose(mlp(E2[3]).npvalue(), ex["out_mlp"], rtol=1e-5, atol=1e-7)
print("OK: DyNet loads autobatch's files and computes the same outputs")
