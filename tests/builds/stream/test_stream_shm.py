"""A DataLoader worker's batches in blocks of memory it reuses once the loop lets them go (stream_shm)."""
from __future__ import annotations

import gc
import importlib.util
import os
import signal

import numpy as np
import pytest

from glyphforge.builds import build

from support.optional import NO_TORCH
from support.specs import RowSpec

torch = pytest.importorskip("torch") if importlib.util.find_spec("torch") else None
pytestmark = pytest.mark.skipif(torch is None, reason=NO_TORCH)


@pytest.fixture(scope="module")
def rows_1030(tmp_path_factory):
    """1,030 rows in 11 shards of 100 (the last of 30)."""
    return build(RowSpec(), data_dir=tmp_path_factory.mktemp("shm"), progress=False)


def main_process(dataset, batch_size: int) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """The batches of ``dataset.stream(batch_size, seed=3)`` in this process, copied."""
    return [(images.copy(), {name: array.copy() for name, array in targets.items()})
            for images, targets in dataset.stream(batch_size, seed=3)]


def loader(dataset, batch_size: int, **options):
    import torch.utils.data

    options = {"num_workers": 2, "multiprocessing_context": "fork", **options}
    return torch.utils.data.DataLoader(dataset.stream(batch_size, seed=3), batch_size=None, **options)


def same(batch, want) -> bool:
    """Whether a batch from a loader holds ``want``'s values (tensors of its dtypes, strings as numpy)."""
    images, targets = batch
    want_images, want_targets = want
    return (images.numpy().dtype == want_images.dtype and np.array_equal(images.numpy(), want_images)
            and list(targets) == list(want_targets)
            and isinstance(targets["row"], torch.Tensor) and np.array_equal(targets["row"].numpy(), want_targets["row"])
            and isinstance(targets["name"], np.ndarray) and np.array_equal(targets["name"], want_targets["name"]))


def blocks_of(pids) -> set:
    """The keys of the loop's maps of the blocks of workers ``pids``."""
    from glyphforge.builds.stream.worker_memory import MAPS

    return {key for key in MAPS if key[0] in pids}


def worker_pids(iterator) -> list[int]:
    return [worker.pid for worker in iterator._workers]


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_every_row_once_with_the_main_process_values_through_reused_blocks(rows_1030, start):
    want = main_process(rows_1030, 48)
    iterator = iter(loader(rows_1030, 48, num_workers=2 if start == "fork" else 1, multiprocessing_context=start))
    pids, found, blocks = worker_pids(iterator), [], set()
    for batch in iterator:
        found.append(batch)
        blocks |= blocks_of(pids)
        found[-1] = None if same(batch, want[len(found) - 1]) else batch  # let the batch go
    assert found == [None] * len(want) == [None] * 22
    assert 1 <= len(blocks) <= 4 * len(pids)  # the batches came in blocks, reused


def test_a_held_batch_or_a_slice_of_it_is_never_overwritten_and_dropped_ones_free_their_blocks(rows_1030):
    want = main_process(rows_1030, 16)
    iterator = iter(loader(rows_1030, 16))
    pids, held, blocks = worker_pids(iterator), [], set()
    for number, (images, targets) in enumerate(iterator):
        if number % 3 == 0:
            held.append((number, images[1:], targets["row"]))  # a slice, or one tensor, keeps the whole block
        blocks |= blocks_of(pids)
    assert len(want) == 65 and len(held) == 22
    for number, images, rows in held:
        assert np.array_equal(images.numpy(), want[number][0][1:]) and np.array_equal(rows.numpy(),
                                                                                     want[number][1]["row"])
    assert len(held) <= len(blocks) <= len(held) + 4 * len(pids)  # the 43 batches let go took a few blocks


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true but no accelerator")
def test_pinned_batches_have_the_same_values(rows_1030):
    want = main_process(rows_1030, 48)
    iterator = iter(loader(rows_1030, 48, pin_memory=True))
    pids, found = worker_pids(iterator), list(iterator)
    assert len(found) == len(want) and all(same(batch, expected) for batch, expected in zip(found, want, strict=True))
    assert blocks_of(pids)


def test_a_killed_worker_fails_the_loader_and_its_blocks_go_with_the_loader(rows_1030):
    from torch.utils.data._utils import signal_handling

    want = main_process(rows_1030, 16)
    iterator = iter(loader(rows_1030, 16, timeout=60))
    pids = worker_pids(iterator)
    kept = next(iterator)  # a batch of the killed worker, held on
    # torch's SIGCHLD handler would raise the kill at whatever line runs when the signal comes (pytest's own
    # frames, the shutdown): without it the loader still finds the worker gone, by its batch's memory or by
    # torch's check of its workers when the next batch is late
    signal_handling._remove_worker_pids(id(iterator))
    iterator._worker_pids_set = False
    os.kill(pids[0], signal.SIGKILL)
    with pytest.raises(RuntimeError, match=f"pid {pids[0]}|pid\\(s\\) {pids[0]}|exited unexpectedly"):
        for _ in iterator:
            pass
    iterator._shutdown_workers()  # the error's traceback keeps the iterator: shut it down now
    del iterator
    assert not blocks_of(pids[:1])  # the loader dropped: its workers' maps too
    assert sum(1 for _ in loader(rows_1030, 16)) == 65  # a new loader works
    assert same(kept, want[0])  # the batch held is whole (its tensors keep their map)


def test_past_the_pool_a_worker_sends_fresh_shared_memory_and_never_waits(rows_1030, monkeypatch):
    from glyphforge.builds.stream import worker_memory as stream_shm

    monkeypatch.setattr(stream_shm, "POOL", 3)  # the fork workers inherit it
    want = main_process(rows_1030, 48)
    iterator = iter(loader(rows_1030, 48))
    pids, found, blocks = worker_pids(iterator), [], set()
    for batch in iterator:
        found.append(batch)  # every batch held
        blocks |= blocks_of(pids)
    assert all(same(batch, expected) for batch, expected in zip(found, want, strict=True)) and len(found) == 22
    assert 2 <= len(blocks) <= 3 * len(pids)
    assert sum(images.is_shared() for images, _ in found) >= 22 - 3 * len(pids)  # the rest: torch's shared memory


def test_a_persistent_worker_sends_its_next_epochs_in_the_blocks_of_its_first(rows_1030):
    # issue 46, row 7: each epoch made a pool afresh: new memory files, their descriptors sent, their pages faulted in
    want = [(images.copy(), {name: array.copy() for name, array in targets.items()})
            for images, targets in rows_1030.stream(48, seed=3, epochs=2)]
    batches = loader(rows_1030, 48, persistent_workers=True)
    seen = []
    for epoch in range(2):
        keys: set = set()
        iterator = iter(batches)
        pids = worker_pids(iterator)
        for number, batch in enumerate(iterator):
            assert same(batch, want[22 * epoch + number])
            keys |= blocks_of(pids)
        seen.append(keys)
    assert seen[1] == seen[0] and len(seen[0]) >= 2


def held_by_this_process() -> tuple[int, int]:
    """The descriptors this process holds of workers' blocks, and its shared maps of them (in /proc/self/maps).

    Counted once the garbage a dropped loader leaves is collected (torch's iterator may be in a cycle).
    """
    gc.collect()
    with open("/proc/self/maps") as maps:
        shared = sum(1 for line in maps if line.split()[1][3] == "s" and BLOCK in line)
    return sum(1 for fd in os.listdir("/proc/self/fd") if BLOCK in link(fd)), shared


#: What the memory file of a worker's block is named (`glyphforge.builds.stream.worker_memory.Block`).
BLOCK = "/memfd:glyphforge-batch-"


def link(fd: str) -> str:
    """What descriptor ``fd`` of this process is of ("": closed since listed, as the listing's own)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        return ""


def three_batches(batches) -> None:
    """Take three batches of ``batches`` (each let go at once) and break out."""
    for number, _ in enumerate(batches):
        if number == 2:
            return


@pytest.mark.parametrize(("options", "loaders"), [
    pytest.param(dict(), 30, marks=pytest.mark.slow),
    (dict(), 3),
    (dict(pin_memory=True), 3),  # the pinning thread unpickles the batches
    (dict(persistent_workers=True), 3),
    pytest.param(dict(multiprocessing_context="spawn"), 1, marks=pytest.mark.slow),
], ids=["fork-30", "fork", "pinned", "persistent", "spawn"])
@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true but no accelerator")
def test_a_loader_broken_out_of_gives_its_blocks_back_when_dropped(rows_1030, options, loaders):
    # issue 42, row 6: the maps stayed until a later loader mapped a block: 7 more descriptors and maps than before
    before, after = held_by_this_process(), []
    for _ in range(loaders):
        three_batches(loader(rows_1030, 16, **options))
        after.append(held_by_this_process())
    assert after == [before] * loaders
    kept = []
    for batch in loader(rows_1030, 48, **options):
        kept.append(batch)  # held: their blocks live on in them
    assert held_by_this_process() > before
    del batch, kept
    assert held_by_this_process() == before
