"""A `~glyphforge.builds.stream.ShardStream`'s state: whether a stream may resume from it, and counting batches.

A state (``stream.state_dict()``) names the built dataset it was saved on by its entry
``key``: each dataset has its own order, so a state is refused on any other dataset
(`ForeignStateError`), whatever their sizes, and so is a state naming none (made by
hand). The same entry read from another place (its data dir mounted elsewhere, or at a
URL: `glyphforge.open_built`) has the same key: the state is accepted there.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from glyphforge.errors import ArgumentError

#: The version of `ShardStream.state_dict`'s format.
STATE_VERSION = 2


class ForeignStateError(ArgumentError, ValueError):
    """A stream state saved on another built dataset (another entry key), or naming none, was given to a stream."""


def check_state(state: Any, key: str, kind: str, order: Mapping[str, Any]) -> None:
    """Refuse ``state`` unless it is a stream state of this format, saved on entry ``key`` with the same ``order``.

    Parameters
    ----------
    state
        What the caller passed to resume from.
    key, kind
        The entry key and kind of the stream's dataset.
    order
        What the stream's global order depends on (seed, shuffle, window, partitions, turns, dataset size).

    Raises
    ------
    ForeignStateError
        ``state`` names another dataset, or none.
    ValueError
        ``state`` is not a stream state of this format, or has another order.
    """
    if not isinstance(state, Mapping) or state.get("version") != STATE_VERSION:
        raise ValueError(f"not a stream state of format version {STATE_VERSION}: {state!r}. Pass what "
                         "stream.state_dict() or stream.state_after(steps) returned")
    saved = state.get("key")
    afresh = "or start this stream afresh (without resume)"
    if not isinstance(saved, str) or not saved:
        raise ForeignStateError(
            f"this stream state names no dataset (its \"key\" is {saved!r}; a state made by hand?), so it cannot be "
            f"checked against this stream's {kind} {key[:12]}: on another dataset it would repeat or skip examples "
            f"without a word. Pass a state stream.state_dict() or stream.state_after(steps) returned, {afresh}")
    if saved != key:
        raise ForeignStateError(
            f"this stream state was saved on the built dataset {saved[:12]}, not on this stream's {kind} {key[:12]}: "
            "each dataset has its own order, so resuming here would repeat or skip examples without a word. Resume it "
            f"on the dataset it was saved on (find_built({saved[:12]!r}) in its data dir, or open_built(<its URL>)), "
            f"{afresh}")
    differ = [f"{name} {state.get(name)!r} (this stream: {value!r})" for name, value in order.items()
              if state.get(name) != value]
    if differ:
        raise ValueError(f"this stream state was saved with {', '.join(differ)}: resuming would read another "
                         "order, so examples would be repeated or skipped. Open the stream with the state's "
                         "seed, shuffle, window, partitions and turns, over the same built dataset")


def count_epochs(batches: int, left: int, per_epoch: int) -> tuple[int, int]:
    """Split ``batches`` into the epochs they end and the batches taken of the epoch they end in, by arithmetic.

    Parameters
    ----------
    batches
        Batches consumed from a position with ``left`` batches left in its epoch (0: at its
        end, its short last batch dropped or none).
    left, per_epoch
        The batches left in the position's epoch, and in each later (whole) epoch.

    Returns
    -------
    tuple of int
        ``(epochs, taken)``: ``epochs`` epochs end (0: ``batches`` stay in the position's
        epoch), and ``taken`` batches are consumed of the one reached.

    Raises
    ------
    ValueError
        ``batches`` is more than 0 and an epoch has no batch: the stream yields none.
    """
    if batches < left or not batches:
        return 0, batches
    if not per_epoch:  # then no position has a batch left either
        raise ValueError(f"{batches} batches cannot have been consumed: this stream yields no batch at all (its "
                         "dataset has fewer rows than a global batch, and drop_last drops them)")
    return 1 + (batches - left) // per_epoch, (batches - left) % per_epoch
