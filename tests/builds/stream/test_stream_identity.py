"""A stream state belongs to its dataset (refused on any other, every way it comes in), and counting batches.

Issue 30, rows 2 and 7: a state saved on one built dataset was accepted on another of the
same size; ``state_after`` looped once per epoch.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.builds import build
from glyphforge.builds.reading.lookup import find_built
from glyphforge.builds.stream.state import ForeignStateError

from support.optional import NO_TORCHDATA
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import RowSpec


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("twins")


@pytest.fixture(scope="module")
def twins(data_dir):
    """Two built datasets of 97 rows in 14 shards: the same size and kind, two entries (seeds 0 and 1)."""
    return tuple(build(RowSpec(n_examples=97, shard_size=7, seed=seed, kind="test-twins"), data_dir=data_dir,
                       progress=False) for seed in (0, 1))


def rows_of(stream) -> list[list[int]]:
    return [targets["row"].tolist() for _, targets in stream]


def foreign(a, b) -> str:
    """What the refusal of a state saved on ``a`` by a stream of ``b`` says."""
    return rf"saved on the built dataset {a.key[:12]}, not on this stream's test-twins {b.key[:12]}: .*Resume it on"


# -- row 2: a state belongs to its dataset ------------------------------------------------------
def test_a_state_of_another_dataset_of_the_same_size_is_refused_every_way_it_comes_in(twins):
    a, b = twins
    stream = a.stream(16, seed=3)
    batches = iter(stream)
    next(batches)
    state = stream.state_dict()
    assert state["key"] == a.key and len(a) == len(b)
    with pytest.raises(ForeignStateError, match=foreign(a, b)):  # resume=
        b.stream(16, seed=3, resume=state)
    other = b.stream(16, seed=3)
    with pytest.raises(ForeignStateError, match=foreign(a, b)):  # load_state_dict
        other.load_state_dict(state)
    assert other.state_dict()["rows"] == 0  # not moved
    with pytest.raises(ForeignStateError, match=foreign(a, b)):  # one worker's stream of a DataLoader
        b.stream(16, seed=3, worker=1, num_workers=2, resume=state)
    with pytest.raises(ForeignStateError, match=foreign(a, b)):  # elastic: on 3 ranks of 5
        b.stream(5, seed=3, rank=2, world_size=3, resume=state)
    ranked = a.stream(8, seed=3, rank=1, world_size=2)
    with pytest.raises(ForeignStateError, match=foreign(a, b)):  # saved on 2 ranks, resumed on 1
        b.stream(16, seed=3, resume=ranked.state_after(3))
    with pytest.raises(ValueError, match=foreign(b, a)):  # a ValueError, as other bad states
        a.stream(16, seed=3, resume=b.stream(16, seed=3).state_after(1))


@pytest.mark.parametrize("key", ["missing", None, ""])
def test_a_state_naming_no_dataset_is_refused(twins, key):
    a = twins[0]
    state = a.stream(16, seed=3).state_after(2)
    if key == "missing":
        del state["key"]
    else:
        state["key"] = key
    with pytest.raises(ForeignStateError, match=rf"names no dataset .*this stream's test-twins {a.key[:12]}: on "
                                                r"another dataset it would repeat or skip examples"):
        a.stream(16, seed=3, resume=state)


# -- issue 42, row 18: a state edited by hand is refused with the rule it breaks ----------------------------------
EDITS = {
    "cut not the global batch": ({"cut": 7}, r"epoch is cut for a global batch of 7 rows, not its own \(batch_size "
                                             r"\* world_size = 8\): .* but its \"since\" is None and its rows 40"),
    "cut past any global batch": ({"cut": 10**18}, r"cut must be an integer >= 1 and <= 17592186044416, got 10+$"),
    "since off the batches": ({"cut": 7, "since": 3}, r"global batch of 7 rows.* its \"since\" is 3 and its rows 40"),
    "since past rows": ({"cut": 7, "since": 41}, r"since must be an integer >= 1 and <= 40, got 41"),
    "until past epochs' bound": ({"until": 10**18}, r"until must be an integer >= 0 and <= 1000000, got 10+$"),
    "until before epoch": ({"epoch": 3, "until": 2}, r"until must be an integer >= 3 and <= 1000003, got 2"),
    "rows past the dataset": ({"rows": 98}, r"rows must be an integer >= 0 and <= 97, got 98"),
    "base past rows": ({"base": 48}, r"base must be an integer <= 40, got 48"),
    "no batch size": ({"batch_size": None}, r"batch_size must be an integer >= 1 and <= 16777216, got None"),
}


@pytest.mark.parametrize("way", ["resume", "load_state_dict", "a worker's stream", "another global batch"])
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_state_edited_by_hand_is_refused_with_the_rule_it_breaks(twins, edit, way):
    a = twins[0]
    stream = a.stream(8, seed=3, epochs=2)
    batches = iter(stream)
    for _ in range(5):
        next(batches)
    changes, message = EDITS[edit]
    state = {**stream.state_dict(), **changes}
    assert stream.state_dict()["rows"] == 40
    with pytest.raises(ValueError, match=message):
        if way == "load_state_dict":
            a.stream(8, seed=3).load_state_dict(state)
        else:
            options = {"a worker's stream": dict(worker=1, num_workers=2), "another global batch": dict(world_size=2),
                       "resume": {}}[way]
            a.stream(8, seed=3, resume=state, **options)


@pytest.mark.parametrize("where", ["opened again", "file://", "s3://"])
def test_the_same_entry_opened_again_or_read_at_a_url_takes_the_state(twins, data_dir, where, request):
    a, b = twins
    if where == "opened again":
        same = find_built(a.key[:12], data_dir)
    elif where == "file://":
        same = gf.open_built(f"file://{a.path}")
    else:
        same = gf.open_built(a.publish(request.getfixturevalue("s3_server").bucket() + "/data", progress=False))
    assert same is not a and same.key == a.key
    state = a.stream(16, seed=3, epochs=2).state_after(9)  # 7 batches an epoch: 2 into the second
    whole = rows_of(a.stream(16, seed=3, epochs=2))
    assert rows_of(same.stream(16, seed=3, resume=state)) == whole[9:]
    again = same.stream(16, seed=3)
    iterator = iter(again)
    next(iterator)
    assert rows_of(a.stream(16, seed=3, resume=again.state_dict())) == whole[1:7]  # and back
    with pytest.raises(ForeignStateError, match=foreign(b, a)):
        same.stream(16, seed=3, resume=b.stream(16, seed=3).state_after(1))


@pytest.mark.skipif(importlib.util.find_spec("torchdata") is None, reason=NO_TORCHDATA)
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("workers", [0, 2])
def test_a_stateful_dataloader_refuses_the_state_of_another_dataset(twins, workers):
    from torchdata.stateful_dataloader import StatefulDataLoader

    a, b = twins
    loader = StatefulDataLoader(a.stream(16, seed=5), batch_size=None, num_workers=workers)
    for step, _ in enumerate(loader, 1):
        if step == 3:
            break
    state = loader.state_dict()
    again = StatefulDataLoader(a.stream(16, seed=5), batch_size=None, num_workers=workers)
    again.load_state_dict(state)
    assert len(list(again)) == 4  # its own dataset takes it
    other = StatefulDataLoader(b.stream(16, seed=5), batch_size=None, num_workers=workers)
    other.load_state_dict(state)
    with pytest.raises(ForeignStateError, match=foreign(a, b)):
        list(other)


# -- row 7: state_after counts epochs by arithmetic ------------------------------------------------
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize(("batch_size", "rank", "world_size", "even_ranks"),
                         [(16, 0, 1, "repeat"), (5, 2, 3, "repeat"), (5, 1, 3, "drop"), (10, 0, 2, "repeat")])
def test_state_after_is_the_state_of_stepping_the_stream_across_epochs(twins, drop_last, batch_size, rank,
                                                                       world_size, even_ranks):
    a = twins[0]
    options = dict(seed=4, drop_last=drop_last, rank=rank, world_size=world_size, even_ranks=even_ranks)
    whole = rows_of(a.stream(batch_size, epochs=5, **options))

    def next_batch(state):  # the first batch of a stream resumed from ``state`` (the rest is not read)
        _, targets = next(iter(a.stream(batch_size, resume=state, **options)))
        return targets["row"].tolist()

    stream = a.stream(batch_size, epochs=4, **options)
    per_epoch = stream.batches_per_rank
    fresh = a.stream(batch_size, **options)  # never iterated: counts from its position
    batches = iter(stream)
    for steps in range(1, 4 * per_epoch + 1):
        next(batches)
        counted, stepped = stream.state_after(steps), stream.state_dict()
        if counted["rows"]:  # within an epoch (at its end the stream has not moved to the next one yet)
            assert counted == stepped, steps
        assert next_batch(counted) == next_batch(fresh.state_after(steps)) == whole[steps], steps
    assert (fresh.state_after(4 * per_epoch)["epoch"], fresh.state_after(4 * per_epoch)["rows"]) == (4, 0)


def test_state_after_from_the_end_of_an_epoch_whose_short_batch_is_dropped_counts_the_next_epochs(twins):
    a = twins[0]
    stream = a.stream(16, seed=2, drop_last=True)  # 6 batches of 16: the 97th row is dropped
    batches = iter(stream)
    for _ in range(6):
        next(batches)
    state = stream.state_dict()
    assert (state["epoch"], state["rows"]) == (0, 96)  # the epoch is over: no batch left in it
    resumed = a.stream(16, seed=2, drop_last=True, epochs=3, resume=state)
    expected = rows_of(a.stream(16, seed=2, drop_last=True, epochs=4))[6:]
    for steps in (1, 6, 7, 13):
        after = a.stream(16, seed=2, drop_last=True, resume=resumed.state_after(steps))
        assert rows_of(after)[0] == expected[steps], steps
    assert (resumed.state_after(7)["epoch"], resumed.state_after(7)["rows"]) == (2, 16)
    with pytest.raises(ValueError, match="3 batches cannot have been consumed: this stream yields no batch at all"):
        a.stream(100, drop_last=True).state_after(3)
    assert a.stream(100, drop_last=True).state_after(0)["rows"] == 0


def test_state_after_a_huge_count_returns_at_once(twins, data_dir):
    """In a child process with a generous timeout: a loop over 5 * 10**11 epochs would never end."""
    a = twins[0]
    code = textwrap.dedent(f"""
        import json
        from glyphforge.builds.reading.lookup import find_built

        stream = find_built({a.key!r}, {str(data_dir)!r}).stream(64, seed=1)
        print(json.dumps([stream.state_after(count) for count in (10**12, 10**12 + 1, 10**30 + 3)]))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    states = __import__("json").loads(result.stdout)
    per_epoch = a.stream(64).batches_per_rank
    assert per_epoch == 2  # 64 rows, then 33
    assert [(state["epoch"], state["rows"]) for state in states] == [
        (10**12 // 2, 0), (10**12 // 2, 64), ((10**30 + 3) // 2, 64)]
    assert states[0] == {**a.stream(64, seed=1).state_dict(), "epoch": 10**12 // 2}
    with pytest.raises(ValueError, match=r"^batches must be an integer >= 0, got -1$"):
        a.stream(64).state_after(-1)
    with pytest.raises(ValueError, match=r"^batches must be an integer >= 0, got 1000000000000.0$"):
        a.stream(64).state_after(1e12)
    np.testing.assert_equal(a.stream(64).state_after(np.int64(3))["rows"], 64)
