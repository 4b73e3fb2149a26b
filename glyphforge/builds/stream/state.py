"""A `ShardStream`'s options and state: their bounds, whether a stream may resume from a
state, and counting batches.

A state (``stream.state_dict()``) holds the format ``version``, the dataset's entry ``key``,
the order's ``seed``, ``shuffle``, ``window``, ``partitions`` and ``turns``, ``n_examples``,
``epoch``, ``cut`` (the global batch the epoch's order is cut for), ``since`` (where a stream of
another global batch resumed the epoch, else None), ``rows`` (the rows of the epoch's order
consumed: global batches consumed times ``G``), ``base`` (the position of the iteration's
batch number 0, which sets the workers' turns: negative when the iteration began in an
earlier epoch), ``until`` (the epoch an iteration under way stops before, else None),
``batch_size`` and ``world_size``.

Each numeric option has a bound (`LIMITS`), far beyond any real run, so that a stream's plan,
its ``len()`` and its arithmetic stay in memory and in 64 bits: a larger value is refused when
the stream is made (`check_options`), as is a state breaking a rule of its fields
(`check_position`).

A state (``stream.state_dict()``) names the built dataset it was saved on by its entry
``key``: each dataset has its own order, so a state is refused on any other dataset
(`ForeignStateError`), whatever their sizes, and so is a state naming none (made by
hand). The same entry read from another place (its data dir mounted elsewhere, or at a
URL: `glyphforge.open_built`) has the same key: the state is accepted there.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from glyphforge._checks import check_int
from glyphforge.builds.stream.plan import DEFAULT_PARTITIONS, DEFAULT_TURNS
from glyphforge.errors import ArgumentError

#: The version of `ShardStream.state_dict`'s format (3: windows of blocks, the pieces of a part permuted).
STATE_VERSION = 3

#: The most each numeric option of a stream may be (``seed``: a 64-bit integer).
LIMITS = {"batch_size": 2**24, "world_size": 2**20, "num_workers": 2**16, "epochs": 10**6, "window": 2**20,
          "partitions": 4096, "turns": 256, "seed": 2**64 - 1}


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


def check_options(options: Mapping[str, Any], shuffle: bool) -> dict[str, int]:
    """Return a stream's numeric ``options``, each checked within `LIMITS` (``rank`` and ``worker`` below their counts).

    ``partitions`` and ``turns`` None are their defaults (`DEFAULT_PARTITIONS`, `DEFAULT_TURNS`;
    1 without ``shuffle``).

    Raises
    ------
    ValueError
        An option is not an integer within its bounds (the message names it and them).
    """
    defaults = {"partitions": DEFAULT_PARTITIONS if shuffle else 1, "turns": DEFAULT_TURNS if shuffle else 1}
    checked = {name: check_int(name, defaults[name] if options[name] is None and name in defaults else options[name],
                               0 if name == "seed" else 1, LIMITS[name]) for name in LIMITS}
    checked["rank"] = check_int("rank", options["rank"], 0, checked["world_size"] - 1)
    checked["worker"] = check_int("worker", options["worker"], 0, checked["num_workers"] - 1)
    return checked


class Position(NamedTuple):
    """A state's position, checked (`check_position`): ``global_batch`` is the state's ``batch_size * world_size``."""

    epoch: int
    rows: int
    base: int
    until: int | None
    cut: int
    since: int | None
    global_batch: int


def check_position(state: Mapping[str, Any], n_examples: int) -> Position:
    """Return the position of a stream ``state`` (`check_state` passed it), checked against the rules it keeps.

    ``epoch``, ``rows`` (``0 <= rows <= n_examples``; at ``n_examples``, the next epoch's start),
    ``base`` (at most ``rows``), ``until`` (None, or the epoch the iteration stops before: from
    ``epoch`` up to the bound of ``epochs`` after it), ``batch_size`` and ``world_size`` (whose
    product is the state's global batch ``G``), ``cut`` and ``since``. ``cut`` is the global batch
    the epoch's order is cut for: ``G``, unless the state's stream resumed the epoch from a state
    of another global batch (its cut) after ``since`` rows: then ``rows`` are ``since`` plus
    whole global batches of ``G`` (or the epoch's end). A state breaking a rule would repeat or
    skip examples: refused.

    Raises
    ------
    ValueError
        A field is missing, of the wrong type, or breaks its rule (the message names it).
    """
    epoch, rows = check_int("epoch", state.get("epoch"), 0), check_int("rows", state.get("rows"), 0, n_examples)
    base = check_int("base", state.get("base"), None, rows)
    size = (check_int("batch_size", state.get("batch_size"), 1, LIMITS["batch_size"])
            * check_int("world_size", state.get("world_size"), 1, LIMITS["world_size"]))
    cut = check_int("cut", state.get("cut"), 1, LIMITS["batch_size"] * LIMITS["world_size"])
    since = state.get("since")
    if cut != size and (since is None or (rows - check_int("since", since, 1, rows)) % size and rows != n_examples):
        raise ValueError(
            f"this stream state's epoch is cut for a global batch of {cut} rows, not its own (batch_size * "
            f"world_size = {size}): a state is cut otherwise only when its stream resumed the epoch from a state of "
            f"that global batch, and then its \"since\" says where (its rows are that many plus whole global batches "
            f"of {size}), but its \"since\" is {since!r} and its rows {rows}. Edited by hand, it would repeat or skip "
            "examples: pass a state stream.state_dict() or stream.state_after(steps) returned")
    if rows == n_examples:
        epoch, rows = epoch + 1, 0
    until = state.get("until")  # the iteration under way goes on to its last epoch
    return Position(epoch, rows, base, None if until is None else check_int("until", until, epoch,
                                                                              epoch + LIMITS["epochs"]),
                    cut, since if cut != size else None, size)


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
