"""What a stream's order costs one process reading every part, from its plan alone (issue 46, rows 2-3).

    python benchmarks/bench_stream_plan_memory.py       # 50,000 rows, shards of 1,000, blocks of 149
    python benchmarks/bench_stream_plan_memory.py --block 1000 --order 4,1,1   # blocks of a whole shard

No data is read: the plan of epoch 1 (`glyphforge.builds.stream.plan.plan_epoch`) of ``--rows``
rows in shards of ``--shard`` rows, each in blocks of ``--block`` rows (the inflatable units: 149
rows of 48x48x3 scenes with their boxes and labels are a block,
`glyphforge.cache.declared.block_rows`) is walked batch by batch (global batches of ``--batch``
rows) for each ``--order`` (``window,partitions,turns``, the window in blocks). Printed per order:

* ``held``: the most rows of the windows open at once (a window is open from the batch that reads
  its first row to the batch that reads its last): what one process holds decoded;
* ``unconsumed``: the most rows decoded and not yet read at once (what freeing read pages would hold);
* ``twice``: the blocks two parts share (cut by a part's edge), each inflated twice an epoch.
"""
from __future__ import annotations

import argparse

import numpy as np

from glyphforge.builds.reading.index import ShardIndex
from glyphforge.builds.stream.plan import Order, plan_epoch


def costs(rows: int, shard: int, block: int, batch: int, order: Order) -> dict[str, int]:
    """``held``, ``unconsumed`` and ``twice`` (the module docstring) of epoch 1 of ``order``."""
    shards = -(-rows // shard)
    counts = np.full(shards, shard)
    counts[-1] = rows - shard * (shards - 1)
    plan = plan_epoch(ShardIndex.from_lengths(np.ones(shards), counts), order, 1, batch, block)
    position = np.empty(rows, np.int64)
    position[plan.cut.places(np.arange(rows))] = np.arange(rows)  # the position of each place
    window = np.searchsorted(plan.ends, np.arange(rows), side="right")
    opened = np.full(len(plan.ends), rows)
    np.minimum.at(opened, window, position)
    closed = np.zeros(len(plan.ends), np.int64)
    np.maximum.at(closed, window, position)
    opened, closed = opened // batch, closed // batch
    held = np.zeros(rows // batch + 2, np.int64)
    np.add.at(held, opened, np.diff(plan.ends, prepend=0))
    np.add.at(held, closed + 1, -np.diff(plan.ends, prepend=0))
    unconsumed = np.zeros(rows // batch + 2, np.int64)
    np.add.at(unconsumed, opened[window], 1)
    np.add.at(unconsumed, position // batch + 1, -1)
    return {"held": int(np.cumsum(held).max()), "unconsumed": int(np.cumsum(unconsumed).max()),
            "twice": len(plan.shard) - len(np.unique(plan.shard * (-(-shard // block)) + plan.first // block))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--shard", type=int, default=1000)
    parser.add_argument("--block", type=int, default=149)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--order", action="append", help="window,partitions,turns (repeatable)")
    args = parser.parse_args()
    for text in args.order or ["1,16,2", "1,8,2", "2,8,2", "28,1,1"]:
        window, partitions, turns = map(int, text.split(","))
        figures = costs(args.rows, args.shard, args.block, args.batch, Order(0, True, window, partitions, turns))
        print(f"window {window}, partitions {partitions}, turns {turns}, blocks of {args.block} rows: "
              + ", ".join(f"{name} {value:,}" for name, value in figures.items()))


if __name__ == "__main__":
    main()
