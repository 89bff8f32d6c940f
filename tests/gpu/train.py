"""train.py - a few training steps of a small model, for tests/gpu/accept.sh.

    python3 train.py ref  OUT.json            # one process, whole batch
    torchrun --nproc_per_node N train.py ddp  OUT.json
    torchrun --nproc_per_node N train.py fsdp OUT.json
    torchrun --nproc_per_node N train.py split OUT.json   # DDP on new_group()

An unmodified PyTorch program: init_process_group("nccl"), DDP or FSDP2
(fully_shard), every rank on cuda:0 (real NCCL refuses two ranks on one GPU;
the shim's pool path does not).  Each rank takes its slice of the same
global batch, so the averaged gradients are the whole batch's and the
losses must match the single-process reference.  Input batches go through
pin_memory() and non_blocking copies (issue 4's pinned memory path).
Rank 0 writes the per-step losses (the global mean) to OUT.json.

split: init_process_group with device_id (eager init), so that new_group()
splits the default communicator (ncclCommSplit; nonblocking when run with
TORCH_NCCL_USE_COMM_NONBLOCKING=1): a group of rank 0 alone (the others
split with NCCL_SPLIT_NOCOLOR), then DDP over a group of every rank.
"""
import json
import os
import sys

import torch
import torch.distributed as dist

STEPS = 8
BATCH = 64
WIDTH = 256


def model():
    torch.manual_seed(1234)
    return torch.nn.Sequential(
        torch.nn.Linear(WIDTH, 4 * WIDTH), torch.nn.GELU(),
        torch.nn.Linear(4 * WIDTH, 4 * WIDTH), torch.nn.GELU(),
        torch.nn.Linear(4 * WIDTH, WIDTH))


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(BATCH, WIDTH, generator=g)
    return x, torch.sin(x)


def train(net, rank, world, dev, group=None):
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    losses = []
    per = BATCH // world
    for step in range(STEPS):
        x, y = batch(step)
        x = x[rank * per:(rank + 1) * per].pin_memory().to(dev, non_blocking=True)
        y = y[rank * per:(rank + 1) * per].pin_memory().to(dev, non_blocking=True)
        loss = torch.nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        if world > 1:
            dist.all_reduce(mean, group=group)
            mean /= world
        losses.append(mean.item())
    return losses


def main():
    mode, out = sys.argv[1], sys.argv[2]
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if mode == "ref":
        losses = train(model().to(dev), 0, 1, dev)
        rank = 0
    else:
        group = None
        if mode == "split":
            dist.init_process_group("nccl", device_id=dev)
        else:
            dist.init_process_group("nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
        net = model().to(dev)
        if mode == "split":
            solo = dist.new_group([0])
            group = dist.new_group(list(range(world)))
            if rank == 0:
                one = torch.ones(4, device=dev)
                dist.all_reduce(one, group=solo)
                assert one.sum().item() == 4, one
            net = torch.nn.parallel.DistributedDataParallel(net, device_ids=[0],
                                                            process_group=group)
        elif mode == "ddp":
            net = torch.nn.parallel.DistributedDataParallel(net, device_ids=[0])
        else:
            from torch.distributed.fsdp import fully_shard
            for layer in net:
                if isinstance(layer, torch.nn.Linear):
                    fully_shard(layer)
            fully_shard(net)
        losses = train(net, rank, world, dev, group)
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"mode": mode, "world": int(os.environ.get("WORLD_SIZE", 1)),
                       "losses": losses}, f)


if __name__ == "__main__":
    main()
