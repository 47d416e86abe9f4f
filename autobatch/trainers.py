"""Trainers: apply accumulated gradients to parameters, then clear them.

Lookup tables are updated sparsely by default: only rows looked up since the last
update are touched (DyNet's sparse updates), so a large vocabulary costs nothing.
"""
import numpy as np


class Trainer:
    def __init__(self, m, learning_rate):
        if learning_rate <= 0:
            raise ValueError(f"learning_rate must be positive, got {learning_rate}")
        self.model = m
        self.learning_rate = float(learning_rate)
        self.clip_threshold = 5.0
        self.clipping_enabled = True
        self.sparse_updates_enabled = True
        self.updates = 0
        self.clips = 0

    def set_clip_threshold(self, thr):
        """Rescale gradients whose global L2 norm exceeds thr (<= 0 disables)."""
        self.clipping_enabled = thr > 0
        self.clip_threshold = float(thr)

    def get_clip_threshold(self):
        return self.clip_threshold

    def set_sparse_updates(self, su):
        self.sparse_updates_enabled = bool(su)

    def status(self):
        return f"[lr={self.learning_rate:.3g} clips={self.clips} updates={self.updates}]"

    def restart(self, learning_rate=None):
        if learning_rate is not None:
            self.learning_rate = float(learning_rate)

    def _clip_scale(self, dense, sparse):
        if not self.clipping_enabled:
            return 1.0
        sq = sum(float(np.dot(g, g)) for _, g in dense)
        sq += sum(float(np.einsum("ij,ij->", g[rows], g[rows])) for _, g, rows in sparse)
        norm = np.sqrt(sq)
        if norm > self.clip_threshold:
            self.clips += 1
            return self.clip_threshold / norm
        return 1.0

    def update(self):
        dense = [(p._flat, p._grad_flat) for p in self.model.parameters_list() if p.is_updated()]
        sparse = []
        for lp in self.model.lookup_parameters_list():
            if not lp.is_updated():
                continue
            if self.sparse_updates_enabled:
                sparse.append((lp.values, lp.grad, lp.used_rows()))
            else:
                dense.append((lp._flat, lp._grad_flat))
        scale = self._clip_scale(dense, sparse)
        for values, grad in dense:
            self._update_dense(values, grad, scale)
            grad[:] = 0
        for values, grad, rows in sparse:
            self._update_rows(values, grad, rows, scale)
            grad[rows] = 0
        for lp in self.model.lookup_parameters_list():
            lp.clear_used()
        self.updates += 1


class SimpleSGDTrainer(Trainer):
    """theta -= learning_rate * grad"""

    def __init__(self, m, learning_rate=0.1):
        super().__init__(m, learning_rate)

    def _update_dense(self, values, grad, scale):
        values -= (self.learning_rate * scale) * grad

    def _update_rows(self, values, grad, rows, scale):
        values[rows] -= (self.learning_rate * scale) * grad[rows]
