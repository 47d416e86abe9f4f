"""What the PyTorch baselines share: one thread, the `TorchTask` base class (seeded
modules, plain SGD) and padding of id sequences. torch is an optional dependency (the
``bench`` extra); these modules are imported only when it is installed."""
import torch
from torch import nn

torch.set_num_threads(1)
try:
    torch.set_num_interop_threads(1)
except RuntimeError:        # already set, or parallel work has started
    pass


class TorchTask(nn.Module):
    """One task's modules; `loss_eager` / `loss_batched` build the minibatch loss."""

    def __init__(self, hidden, seed, meta):
        super().__init__()
        torch.manual_seed(seed)
        self.H, self.meta = hidden, meta
        self.build()

    def sgd(self, lr):
        return torch.optim.SGD(self.parameters(), lr=lr)


def _pad(seqs, value=0):
    """(T, B) long tensor, lengths, and a (B, T) mask of real positions."""
    lengths = torch.tensor([len(s) for s in seqs])
    T = int(lengths.max())
    out = torch.full((len(seqs), T), value, dtype=torch.long)
    for b, s in enumerate(seqs):
        out[b, :len(s)] = torch.tensor(s)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    return out.t().contiguous(), lengths, mask
