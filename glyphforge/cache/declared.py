"""What a built entry's manifest declares, checked for sense before anything is fetched or allocated by it.

Readers size everything by a built entry's manifest: a batch, a stream's window and a block of
rows by its ``meta["layout"]`` (each array's dtype and per-row shape), a decoded copy by
``n_examples`` rows of it, a download by the ``size`` of each file in its files table. Anyone
who can write the entry can write its manifest too, hashes recomputed, so `built_problem`
checks what it declares against fixed bounds and against itself, when it is parsed
(`glyphforge.cache.manifest.parse_manifest`: on disk and at a URL alike), before any of it is
used:

* the layout: a non-empty object of arrays, each ``{"dtype": descr, "shape": [dims]}`` with a
  dtype of `ALLOWED_KINDS` (no objects), at most `MAX_ROW_DIMS` dims, each a positive integer,
  and one row of all arrays together at most `MAX_ROW_BYTES`;
* ``n_examples``, a positive integer (the params' own, when they hold one); the shards,
  ``ceil(n_examples / shard_size)``, at most `MAX_SHARDS` (``meta["n_shards"]`` and
  ``meta["parts"]`` agreeing); ``meta["images"]``, one of the layout's arrays;
* the files' sizes: ``index.npy`` (every build has one) holds a fixed number of bytes a shard (`index_sizes`);
  ``blocks.npy`` 8 bytes for each array of each shard and for each of its blocks (`blocks_sizes`); the
  data files hold ``n_examples`` rows, compressed (`data_sizes`: no fewer bytes than deflate
  could inflate to them, no more than stored data and each shard's and block's framing).

`MAX_ROW_BYTES` is 1 GiB: every reader holds at least one row of every array at once (a block,
a batch, a window of rows), so a row bounds the least any read allocates, and a batch of 64
such rows is 64 GiB already. The largest rows glyphforge makes (scenes) are under 1 MiB; an 8K
RGBA float32 image (0.5 GiB) still fits.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from glyphforge.cache.safe_pickle import MAX_INFLATION

__all__ = ["ALLOWED_KINDS", "BLOCKS_FILE", "BLOCK_BYTES", "BLOCK_FRAMING", "INDEX_FILE", "MAX_ROW_BYTES",
           "MAX_ROW_DIMS", "MAX_SHARDS", "MEMBER_OVERHEAD", "block_rows", "built_problem", "layout_dtype",
           "layout_problem", "member_bounds", "row_nbytes", "rows_per_block", "shard_blocks"]

#: The data file of a built entry holding its shard index (`glyphforge.builds.reading.index`).
INDEX_FILE = "index.npy"
#: The data file of a built entry holding where each block of each shard is (`glyphforge.builds.reading.blocks`).
BLOCKS_FILE = "blocks.npy"
#: About the bytes of one block of a shard (the rows `block_rows` counts, every array's together): a reader inflates
#: only the blocks holding the rows it needs.
BLOCK_BYTES = 1 << 20
#: The most bytes one row (one example: every array's row together) may declare (see the module docstring).
MAX_ROW_BYTES = 1 << 30
#: The most dims of an array's row: with the rows' axis, numpy's limit of 32 (numpy 1.x).
MAX_ROW_DIMS = 31
#: The most shards a build may have: its index (32 or 40 bytes a shard) and a driver's bookkeeping stay in the
#: tens of MB. Raise shard_size beyond it.
MAX_SHARDS = 1_000_000
#: The dtype kinds a layout may name: booleans, numbers, fixed-width strings, dates and structured records of them.
ALLOWED_KINDS = "biufcSUMmV"
#: The most bytes a shard's member holds beyond its rows' (stored-deflate) bytes: gzip framing and ``.npy`` headers
#: (a few KiB), with a wide margin.
MEMBER_OVERHEAD = 2 << 20
#: The most bytes the gzip member of one block of one array adds to its (stored-deflate) bytes: a 10-byte header,
#: an 8-byte trailer and a deflate block's framing, with a margin.
BLOCK_FRAMING = 64
#: The most bytes of an ``index.npy`` or ``blocks.npy`` beyond its table: a ``.npy`` header (128 bytes as numpy
#: writes it).
INDEX_HEADER_MAX = 4096
#: Int64 rows of an index: offset, length, start, stop (and part, for a multi-part entry).
_INDEX_ROWS, _PARTS_INDEX_ROWS = 4, 5


def layout_dtype(descr: Any) -> np.dtype[Any]:
    """The dtype of a layout's descr (JSON turned a structured dtype's tuples into lists: undo that)."""
    def tuples(part: Any) -> Any:
        return [tuple(tuples(item) for item in field) for field in part] if isinstance(part, list) else part

    return np.lib.format.descr_to_dtype(tuples(descr))


def row_nbytes(layout: Mapping[str, Any]) -> int:
    """Bytes of one row of every array of a checked ``layout`` (`layout_problem`)."""
    return sum(layout_dtype(info["dtype"]).itemsize * math.prod(info["shape"]) for info in layout.values())


def block_rows(layout: Mapping[str, Any]) -> int:
    """Rows of each block of a shard of a checked ``layout`` (the last block of a shard may hold fewer): as many as
    `BLOCK_BYTES` hold, at least 1."""
    return rows_per_block(row_nbytes(layout))


def rows_per_block(row_bytes: int) -> int:
    """Rows of each block of a shard whose rows (of all arrays together) are ``row_bytes`` bytes each: `block_rows`."""
    return max(1, BLOCK_BYTES // max(row_bytes, 1))


def shard_blocks(rows: np.ndarray, layout: Mapping[str, Any]) -> np.ndarray:
    """How many blocks (of `block_rows` rows, the last one short) shards of ``rows`` rows each of ``layout`` hold."""
    step = block_rows(layout)
    return -(-rows.astype(np.int64) // step)


def member_bounds(rows: np.ndarray, layout: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The fewest and most bytes shards' runs of gzip members of ``rows`` rows each of ``layout`` can be.

    Fewest: deflate inflates at most `MAX_INFLATION` times. Most: the rows stored (deflate's
    stored blocks add 5 bytes a 64 KiB), `BLOCK_FRAMING` for each block of each array and
    `MEMBER_OVERHEAD`.
    """
    raw = rows.astype(np.float64) * row_nbytes(layout)  # float: a lying index cannot overflow it
    framing = shard_blocks(rows, layout).astype(np.float64) * len(layout) * BLOCK_FRAMING
    return np.ceil(raw / MAX_INFLATION), raw + raw / 1000 + framing + MEMBER_OVERHEAD


def layout_problem(layout: object) -> str | None:
    """What is wrong with a built entry's ``meta["layout"]`` (see the module docstring), None when nothing is."""
    if not isinstance(layout, dict) or not layout:
        return f"its layout is {_shown(layout)}, not an object of arrays {{name: {{'dtype': ..., 'shape': [...]}}}}"
    total = 0
    for name, info in layout.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape"}:
            return f"its layout records the array {name!r} as {_shown(info)}, not as {{'dtype': ..., 'shape': [...]}}"
        problem = array_problem(info["dtype"], info["shape"])
        if problem is not None:
            return f"its layout's array {name!r} {problem}"
        total += layout_dtype(info["dtype"]).itemsize * math.prod(info["shape"])
    if total > MAX_ROW_BYTES:
        return f"its layout's rows are {total:,} bytes each, more than the {MAX_ROW_BYTES:,} a row may be"
    return None


def array_problem(descr: object, shape: object) -> str | None:
    """What is wrong with an array of dtype ``descr`` whose rows have ``shape``, None when nothing is."""
    if not (isinstance(shape, list) and len(shape) <= MAX_ROW_DIMS
            and all(type(dim) is int and dim > 0 for dim in shape)):
        return (f"has rows of shape {_shown(shape)}, not a list of at most {MAX_ROW_DIMS} positive integers")
    try:
        dtype = layout_dtype(descr)
    except (TypeError, ValueError, KeyError, IndexError, OverflowError, RecursionError, MemoryError):
        return f"has the dtype {_shown(descr)}, which is not a numpy dtype"
    if dtype.hasobject or dtype.kind not in ALLOWED_KINDS or dtype.itemsize < 1:
        return f"has the dtype {dtype}, which no built dataset holds (numbers, booleans, strings, dates or records)"
    if dtype.itemsize * math.prod(shape) > MAX_ROW_BYTES:
        return (f"has rows of {dtype} of shape {shape}: {dtype.itemsize * math.prod(shape):,} bytes, more than the "
                f"{MAX_ROW_BYTES:,} a row may be")
    return None


def built_problem(manifest: Mapping[str, Any]) -> str | None:
    """What is wrong with what a built entry's parsed ``manifest`` declares (see the module docstring), or None."""
    meta, params = manifest["meta"], manifest["params"]
    problem = layout_problem(meta["layout"])
    if problem is not None:
        return problem
    n_examples = meta["n_examples"]
    if type(n_examples) is not int or n_examples < 1:
        return f"its n_examples is {_shown(n_examples)}, not a positive integer"
    if params.get("n_examples", n_examples) != n_examples:
        return f"its meta's n_examples ({n_examples:,}) is not its params' ({_shown(params['n_examples'])})"
    images = meta.get("images")
    if images is None:
        return "it names no images array (meta['images'], which every build records)"
    if not isinstance(images, str) or images not in meta["layout"]:
        return f"its images array {_shown(images)} is not one of its layout's arrays"
    shards = _shards_problem(meta, params, n_examples)
    if isinstance(shards, str):
        return shards
    files = {name: info["size"] for name, info in manifest["files"].items()}
    parts = meta.get("parts")
    if INDEX_FILE not in files:
        return f"its files table lists no {INDEX_FILE} (the shard index every build writes)"
    if BLOCKS_FILE not in files:
        return (f"its files table lists no {BLOCKS_FILE}, the block table every build writes since glyphforge 0.5 "
                f"(build format 4): it was built before, and is not read; build it again")
    return (index_sizes(files[INDEX_FILE], shards, parts is not None)
            or data_sizes(sum(size for name, size in files.items() if name not in (INDEX_FILE, BLOCKS_FILE)),
                          n_examples, meta["layout"], shards)
            or blocks_sizes(files[BLOCKS_FILE], n_examples, meta["layout"], shards))


def _shards_problem(meta: Mapping[str, Any], params: Mapping[str, Any], n_examples: int) -> tuple[int, int] | str:
    """The fewest and most shards the entry may have, or what is wrong with what it says of them."""
    shard_size = params.get("shard_size")
    if shard_size is None:
        low, high = 1, min(n_examples, MAX_SHARDS)
    elif type(shard_size) is not int or shard_size < 1:
        return f"its shard_size is {_shown(shard_size)}, not a positive integer"
    else:
        low = high = -(-n_examples // shard_size)
    if low > MAX_SHARDS:
        return f"its {n_examples:,} examples in shards of {shard_size:,} make {low:,} shards, more than {MAX_SHARDS:,}"
    parts = meta.get("parts")
    if parts is not None and not (isinstance(parts, list) and all(isinstance(part, str) for part in parts)):
        return f"its parts are {_shown(parts)}, not a list of file names"
    for what, count in (("n_shards", meta.get("n_shards")), ("parts", None if parts is None else len(parts))):
        if count is not None and not (type(count) is int and low <= count <= high):
            return f"its {what} says {_shown(count)} shards where its examples make {_span(low, high)}"
        if count is not None:
            low = high = count
    return low, high


def index_sizes(size: int, shards: tuple[int, int], multi_part: bool) -> str | None:
    """What is wrong with an ``index.npy`` of ``size`` bytes for ``shards`` (fewest, most), None when nothing is."""
    per_shard = 8 * (_PARTS_INDEX_ROWS if multi_part else _INDEX_ROWS)
    low, high = shards[0] * per_shard, shards[1] * per_shard + INDEX_HEADER_MAX
    if low <= size <= high:
        return None
    return (f"its files table records {INDEX_FILE} as {size:,} bytes, where an index of its {_span(*shards)} shards "
            f"is {_span(low, high)} bytes ({per_shard} a shard and a header)")


def blocks_sizes(size: int, n_examples: int, layout: Mapping[str, Any], shards: tuple[int, int]) -> str | None:
    """What is wrong with a ``blocks.npy`` of ``size`` bytes for ``n_examples`` rows of ``layout`` in ``shards``
    (fewest, most), None when nothing is: 8 bytes for each array of each shard and for each of its blocks
    (`glyphforge.builds.reading.blocks`), and a header."""
    step, arrays = block_rows(layout), len(layout)
    low = 8 * arrays * (-(-n_examples // step) + shards[0])
    high = 8 * arrays * (n_examples // step + 2 * shards[1]) + INDEX_HEADER_MAX
    if low <= size <= high:
        return None
    return (f"its files table records {BLOCKS_FILE} as {size:,} bytes, where the block table of {n_examples:,} rows "
            f"of {arrays} arrays in blocks of {step:,} rows in {_span(*shards)} shards is {_span(low, high)} bytes")


def data_sizes(size: int, n_examples: int, layout: Mapping[str, Any], shards: tuple[int, int]) -> str | None:
    """What is wrong with data files of ``size`` bytes in all for ``n_examples`` rows of ``layout`` in at most
    ``shards[1]`` shards (`member_bounds` of them all, a block more for each shard), None when nothing is."""
    fewest, most = (int(bound[0]) for bound in member_bounds(np.array([n_examples]), layout))
    most += (shards[1] - 1) * (MEMBER_OVERHEAD + len(layout) * BLOCK_FRAMING)
    if fewest <= size <= most:
        return None
    return (f"its data files are {size:,} bytes in all, where {n_examples:,} rows of {row_nbytes(layout):,} bytes "
            f"compress to {_span(fewest, most)} bytes (its n_examples or layout lies)")


def _span(low: int, high: int) -> str:
    return f"{low:,}" if low == high else f"{low:,} to {high:,}"


def _shown(value: object) -> str:
    """``value`` for a message, cut short (a lying manifest may hold anything)."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."
