"""A stream divides decoding: each rank and worker reads the shards of its own parts, and the order stays one."""
from __future__ import annotations

import collections
import logging

import numpy as np
import pytest

from glyphforge.builds import build

from support.specs import RowSpec

#: What `decode_window` logs for each shard it reads.
READS = "glyphforge.builds.stream.windows"


@pytest.fixture(scope="module")
def rows_6400(tmp_path_factory):
    """6,400 rows in 64 shards of 100 (a block each): 32 parts of 2 whole shards for a global batch of 64."""
    return build(RowSpec(n_examples=6400, shard_size=100), data_dir=tmp_path_factory.mktemp("division"),
                 progress=False)


def read_epoch(stream, caplog) -> tuple[list[int], list[np.ndarray]]:
    """The shards ``stream`` reads in one epoch (one item per read) and the rows of its batches."""
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=READS):
        rows = [targets["row"] for _, targets in stream]
    return [int(record.args[0]) for record in caplog.records if record.name == READS], rows


def own_shards(plan, lanes: range, turns: range) -> set[int]:
    """The shards of the parts of ``lanes`` and ``turns`` in ``plan`` (part ``lane * turns + turn``)."""
    parts = {lane * plan.cut.turns + turn for lane in lanes for turn in turns}
    pieces = np.repeat(plan.part, np.diff(plan.windows))  # the part of each piece
    return set(plan.shard[np.isin(pieces, list(parts))].tolist())


@pytest.mark.parametrize(("world_size", "num_workers"), [(1, 1), (2, 1), (4, 2), (8, 2)])
def test_each_rank_and_worker_decodes_only_the_shards_of_its_own_parts(rows_6400, caplog, world_size, num_workers):
    seen, reads = collections.Counter(), collections.Counter()
    for rank in range(world_size):
        for worker in range(num_workers):
            stream = rows_6400.stream(64 // world_size, seed=5, rank=rank, world_size=world_size, worker=worker,
                                      num_workers=num_workers)
            shards, rows = read_epoch(stream, caplog)
            lanes = range(rank * stream.partitions // world_size, (rank + 1) * stream.partitions // world_size)
            assert set(shards) == own_shards(stream.plan(0), lanes, range(worker, 2, num_workers))
            assert len(shards) == 64 // (world_size * num_workers)  # each of its shards once: its share, exactly
            reads.update(shards)
            seen.update(np.concatenate(rows).tolist())
    assert reads == {shard: 1 for shard in range(64)}  # every shard read once in the whole job
    assert seen == {row: 1 for row in range(6400)}  # every example once


@pytest.mark.parametrize(("world_size", "num_workers"), [(3, 1), (16, 1), (2, 4)])
def test_ranks_and_workers_that_split_a_part_read_the_same_order_and_share_its_shards(rows_6400, caplog, world_size,
                                                                                      num_workers):
    batch = 48 if world_size == 3 else 64 // world_size
    whole = [rows for rows in read_epoch(rows_6400.stream(batch * world_size, seed=5), caplog)[1]]
    reads = []
    for rank in range(world_size):
        per_worker = []
        for worker in range(num_workers):
            stream = rows_6400.stream(batch, seed=5, rank=rank, world_size=world_size, worker=worker,
                                      num_workers=num_workers)
            shards, rows = read_epoch(stream, caplog)
            reads.append(len(shards))
            per_worker.append(rows)
        # the rank's batches, the workers' in turn, are its positions of the one global order
        mine = [per_worker[number % num_workers][number // num_workers] for number in range(len(whole))]
        share = [whole_batch[rank * batch:(rank + 1) * batch] for whole_batch in whole]
        assert all(np.array_equal(a, b) for a, b in zip(mine[:-1], share[:-1], strict=True))
    assert max(reads) <= 2 * 64 / (world_size * num_workers) + 2  # a part split in two is read by both


def test_a_resume_on_another_global_batch_finishes_the_epoch_in_its_order_then_cuts_the_next_for_the_new_one(
        rows_6400):
    first = rows_6400.stream(32, seed=2)
    batches = iter(first)
    seen = collections.Counter(np.concatenate([next(batches)[1]["row"] for _ in range(7)]).tolist())
    state = first.state_dict()
    assert (state["cut"], state["rows"]) == (32, 224)
    second = rows_6400.stream(16, seed=2, rank=1, world_size=3, resume=state)  # G = 48, rank 1 of 3
    assert second.state_dict()["cut"] == 32  # the rest of epoch 0 is in the order cut for 32
    ranks = [rows_6400.stream(16, seed=2, rank=rank, world_size=3, resume=state) for rank in range(3)]
    parts = [iter(stream) for stream in ranks]
    seen.update(np.concatenate([next(part)[1]["row"] for part in parts for _ in range(5)]).tolist())
    again = ranks[0].state_dict()
    assert (again["cut"], again["rows"]) == (32, 224 + 5 * 48)  # saved mid-epoch again: still the old cut ...
    assert again["since"] == 224  # ... resumed there, whole global batches of 48 since
    rest = rows_6400.stream(64, seed=2, resume=again)
    seen.update(np.concatenate([targets["row"] for _, targets in rest]).tolist())
    assert seen == {row: 1 for row in range(6400)}  # epoch 0: each example once over three global batch sizes
    assert rest.state_dict()["cut"] == 64 and rest.state_dict()["epoch"] == 1
    assert rest.plan(1).cut.size == 64 and rest.plan(1).n_rows == 6400  # epoch 1 is cut for the new global batch
