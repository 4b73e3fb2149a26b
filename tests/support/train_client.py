"""A real data-parallel training client: torchrun, gloo on CPU, a linear model trained from ``ds.stream``.

    torchrun --nproc_per_node=2 tests/support/train_client.py DATA_DIR KEY OUT [--hold-after STEP]

Trains for ``--epochs`` epochs over the built dataset ``KEY`` (the rows of
`support.specs.RowSpec`: each example's ``row`` is its id) in global batches of
``--global-batch`` rows, whatever the number of processes, each reading its part through
a ``DataLoader`` of ``--workers`` workers. Every ``--every`` steps rank 0 writes
``OUT/checkpoint.pt`` (the model, the optimizer and the stream's state, atomically); a
run finding one resumes from it, on any number of processes. Each rank appends one line
per batch to ``OUT/ids-<run>-rank<r>.txt``: ``epoch batch id id ...`` (``batch`` is the
global batch's number within its epoch). Each DataLoader worker logs the shards it decodes
to ``OUT/reads-<epoch>-rank<r>-worker<w>-<pid>.log`` (glyphforge's DEBUG lines: one a shard
read). With ``--hold-after STEP`` every rank stops after
that step (``OUT/holding-rank<r>`` says so) and waits to be killed. A run that ends writes
``OUT/done``: its number of processes and steps.
"""
from __future__ import annotations

import argparse
import functools
import logging
import os
import time
import uuid
from pathlib import Path

import torch
import torch.distributed as dist
import torch.utils.data

from glyphforge.builds.reading.lookup import find_built

CHECKPOINT = "checkpoint.pt"
HOLD_TIMEOUT = 600.0


def save_checkpoint(out: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    draft = out / f".{CHECKPOINT}.{uuid.uuid4().hex}"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "stream": state}, draft)
    os.replace(draft, out / CHECKPOINT)


def log_reads(out: Path, rank: int, epoch: int, worker: int) -> None:
    """A DataLoader worker's ``worker_init_fn``: log each shard the stream decodes here to a file of its own."""
    handler = logging.FileHandler(out / f"reads-{epoch}-rank{rank}-worker{worker}-{os.getpid()}.log")
    reads = logging.getLogger("glyphforge.builds.stream.windows")
    reads.setLevel(logging.DEBUG)
    reads.addHandler(handler)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir")
    parser.add_argument("key")
    parser.add_argument("out", type=Path)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--global-batch", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--every", type=int, default=4)
    parser.add_argument("--hold-after", type=int)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(12, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    checkpoint = args.out / CHECKPOINT
    resume = None
    if checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=True)
        model.module.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        resume = saved["stream"]
    dataset = find_built(args.key, args.data_dir)
    stream = dataset.stream(args.global_batch // world, seed=11, rank=rank, world_size=world, resume=resume)
    log = open(args.out / f"ids-{uuid.uuid4().hex[:8]}-rank{rank}.txt", "a", encoding="ascii")  # noqa: SIM115
    step = 0
    for epoch in range(stream.epoch, args.epochs):
        stream.set_epoch(epoch)  # the workers iterate copies: tell this one (a resumed epoch stays where it was)
        loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=args.workers,
                                             worker_init_fn=functools.partial(log_reads, args.out, rank, epoch))
        for steps, (images, targets) in enumerate(loader, 1):
            position = stream.state_after(steps - 1)
            number = position["rows"] // stream.global_batch_size
            log.write(f"{position['epoch']} {number} {' '.join(map(str, targets['row'].tolist()))}\n")
            log.flush()
            x = images.reshape(len(images), -1).float() / 255
            loss = torch.nn.functional.mse_loss(model(x).squeeze(1), (targets["row"] % 2).float())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % args.every == 0 and rank == 0:
                save_checkpoint(args.out, model.module, optimizer, stream.state_after(steps))
            if step == args.hold_after:
                dist.barrier()  # every rank has logged this step, rank 0 has checkpointed
                (args.out / f"holding-rank{rank}").touch()
                time.sleep(HOLD_TIMEOUT)  # killed here
                raise SystemExit(f"rank {rank} held for {HOLD_TIMEOUT:g} s and was not killed")
    log.close()
    dist.barrier()
    if rank == 0:
        (args.out / "done").write_text(f"{world} {step}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
