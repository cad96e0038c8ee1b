"""FSDP2 (fully_shard) through the collgpu backend, bf16 mixed precision, on CUDA tensors.

    mpirun -np N python3 test_fsdp2.py

A small transformer (embedding, 2 encoder layers, a head) trained 20 steps with Adam on a
fixed batch per rank, written the way PyTorch's FSDP2 tutorial writes it: fully_shard on each
layer and on the root, MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=bfloat16) (so
the gradients are reduce-scattered in bfloat16: libcollgpu's op), the same model under DDP with
bfloat16 autocast as the reference.  The global loss of every step (the mean over ranks) must
match DDP's to bfloat16's tolerance: 5 % relative per step (bfloat16 keeps 8 significant bits,
about 0.4 % per rounding, and 20 steps of Adam on two different rounding orders drift apart by
a few of those), and both must learn (the last loss below 60 % of the first).  Prints TAP.
"""

import copy
import sys

import collgpu_torch  # noqa: F401
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
except ImportError:  # torch < 2.6 keeps it under _composable
    from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard

STEPS, VOCAB, DIM, SEQ, BATCH = 20, 64, 64, 16, 8


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(DIM, 4, 4 * DIM, dropout=0.0, batch_first=True)
            for _ in range(2))
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, x):
        h = self.emb(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


def batch(rank, dev):
    g = torch.Generator().manual_seed(1234 + rank)
    x = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    return x.to(dev), ((x * 7 + 3) % VOCAB).to(dev)  # a mapping the model can learn


def train(model, step_ctx, dev, rank):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x, y = batch(rank, dev)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        with step_ctx():
            loss = nn.functional.cross_entropy(model(x).float().reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        g = loss.detach().clone()
        dist.all_reduce(g)
        losses.append(g.item() / dist.get_world_size())
    return losses


def main():
    dist.init_process_group("collgpu")
    rank = dist.get_rank()
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    base = Net().to(dev)

    ddp = DDP(copy.deepcopy(base), device_ids=[dev.index])
    ref = train(ddp, lambda: torch.autocast("cuda", dtype=torch.bfloat16), dev, rank)

    model = copy.deepcopy(base)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    for layer in model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    got = train(model, torch.enable_grad, dev, rank)

    worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
    ok = worst <= 0.05 and got[-1] < 0.6 * got[0] and ref[-1] < 0.6 * ref[0]
    if rank == 0:
        print("1..1")
        print(f"{'ok' if ok else 'not ok'} 1 - FSDP2 bf16 ({dist.get_world_size()} ranks, "
              f"{STEPS} steps): loss {got[0]:.4f} -> {got[-1]:.4f}, DDP bf16 autocast "
              f"{ref[0]:.4f} -> {ref[-1]:.4f}, worst step {worst * 100:.2f} % apart (<= 5 %)")
        print("# fsdp2 " + " ".join(f"{v:.4f}" for v in got))
        print("# ddp   " + " ".join(f"{v:.4f}" for v in ref), flush=True)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
