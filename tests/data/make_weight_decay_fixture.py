"""Records DyNet's weight decay (tests/data/weight_decay_dynet.json), run with DyNet:

    /work/venv-dynet/bin/python tests/data/make_weight_decay_fixture.py --dynet-weight-decay 0.1

Three steps of SGD, momentum and Adam on a model whose loss uses W, a subcollection's
U and row 0 of E; V and rows 1-2 of E are never used. The values recorded are the ones
expressions see (DyNet's as_array() shows its unscaled storage)."""
import json
import sys

import numpy as np
import dynet as dy

out = {}
for name, make in (("sgd", lambda pc: dy.SimpleSGDTrainer(pc, 0.1)),
                   ("momentum", lambda pc: dy.MomentumSGDTrainer(pc, 0.1, 0.9)),
                   ("adam", lambda pc: dy.AdamTrainer(pc, 0.1))):
    pc = dy.ParameterCollection()
    sub = pc.add_subcollection("s")
    W = pc.parameters_from_numpy(np.array([[1., 2.], [3., 4.]]))
    U = sub.parameters_from_numpy(np.array([1., -1.]))
    V = pc.parameters_from_numpy(np.array([1., 2.]))
    E = pc.lookup_parameters_from_numpy(np.arange(6.).reshape(3, 2))
    tr = make(pc)
    steps = []
    for step in range(3):
        dy.renew_cg()
        x = dy.inputVector([1., -2.])
        loss = dy.squared_norm(W * x + U + E[0])
        loss.value()
        loss.backward()
        tr.update()
        dy.renew_cg()
        steps.append({"W": dy.parameter(W).npvalue().tolist(), "U": dy.parameter(U).npvalue().tolist(),
                      "V": dy.parameter(V).npvalue().tolist(),
                      "E": [E[i].npvalue().tolist() for i in range(3)]})
    out[name] = steps
out["weight_decay"] = dy.ParameterCollection().get_weight_decay()
json.dump(out, open(sys.argv[0].replace("make_weight_decay_fixture.py", "weight_decay_dynet.json"), "w"))
