"""Writes version 1 save files with autobatch before the save-format hardening
(run from a checkout at 60ecba6): tests/data/v1/."""
import sys
import numpy as np
import autobatch as dy
out = sys.argv[1]
pc = dy.ParameterCollection(seed=3)
W = pc.add_parameters((3, 4), name="W")
E = pc.add_lookup_parameters((5, 2), name="E")
sub = pc.add_subcollection("enc")
sub.add_parameters(2, name="b")
lstm = dy.VanillaLSTMBuilder(1, 2, 3, pc, forget_bias=0.5)
bi = dy.BiRNNBuilder(1, 2, 4, pc, dy.GRUBuilder)
pc.save(out + "/params.data")
dy.save(out + "/model", [W, E, sub, lstm, bi])
np.savez(out + "/expected.npz", **{p.name(): p.as_array() for p in pc.parameters_list() + pc.lookup_parameters_list()})
