"""A built dataset as Parquet files (``ds.export(dir, format="parquet")``) and as a Hugging Face ``datasets.Dataset``.

Both go through `glyphforge.hf` (the ``hf`` extra), with the same features: one column per
array (``image``/``label`` for a single-image, single-label dataset: `glyphforge.hf.column_names`),
labels as ``ClassLabel`` with the names table the build's metadata carries (`names_tables`), the
images as ``Image()`` where they are uint8 ``(H, W)`` or ``(H, W, 3)``.

The files, ``data-00000-of-0000N.parquet``, are written shard after shard: a few decoded
shards (the one written and `AHEAD` more) and one row group (`ROW_GROUP_BYTES` of decoded
rows) are in memory at a time, whatever the dataset's size; a file holds `FILE_BYTES` of
decoded rows at most. Their schema carries the ``datasets`` features, so
``datasets.load_dataset("parquet", data_files=...)`` gives what `to_hf` gives, feature for
feature. The staging, the lock and the publishing are
`glyphforge.builds.export.files`'s.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge import hf
from glyphforge.builds.reading.protocols import ShardReader

__all__ = ["FILE_BYTES", "ROW_GROUP_BYTES", "file_names", "names_tables", "to_hf", "write_parquet_files"]

#: Decoded bytes of the rows of one row group (its last may hold fewer): what a reader reads at once.
ROW_GROUP_BYTES = 32 << 20
#: Decoded bytes of the rows of one file, at most (a whole number of row groups).
FILE_BYTES = 1 << 30
#: Shards decoded and converted ahead of the one written, on as many threads (inflating, copying and writing
#: release the GIL: two cores' worth).
AHEAD = 2
#: Arrays named by a names table in a build's metadata: ``metadata[table]`` names the values of ``array``.
NAMED_BY = {"labels": "class_names"}


def names_tables(metadata: Mapping[str, Any], layout: Mapping[str, Any]) -> dict[str, Sequence[str]]:
    """The names table of each array a build's ``metadata`` names (`NAMED_BY`: scenes' ``class_names``)."""
    return {array: list(metadata[table]) for array, table in NAMED_BY.items()
            if array in layout and isinstance(metadata.get(table), list)}


def to_hf(dataset: ShardReader, arrays: Mapping[str, np.ndarray]) -> Any:
    """``dataset``'s decoded ``arrays`` as a ``datasets.Dataset`` in memory, fingerprinted by the entry's key."""
    return hf.dataset(arrays, names_tables(dataset.metadata, dataset.layout), f"glyphforge-{dataset.key[:40]}",
                      dataset.image_name)


def file_names(dataset: ShardReader) -> list[str]:
    """The names of the Parquet files an export of ``dataset`` writes, in row order."""
    count = max(1, -(-len(dataset) // _file_rows(dataset)))
    return [f"data-{number:05d}-of-{count:05d}.parquet" for number in range(count)]


def write_parquet_files(dataset: ShardReader, staging: Path) -> list[str]:
    """Write ``dataset``'s rows as Parquet files into the directory ``staging`` (see the module docstring).

    Returns
    -------
    list of str
        The files' names (`file_names`), in row order.
    """
    pa, _ = hf.require("Exporting to Parquet")
    import pyarrow.parquet as pq

    reader = dataset.reopened(cache_shards=0)
    columns = _columns(reader)
    schema_features = _features(reader, columns)
    schema = schema_features.arrow_schema
    names, group, per_file = file_names(reader), _group_rows(reader), _file_rows(reader)
    pending: list[Any] = []
    written = 0
    writer = None

    def flush(rows: int) -> None:
        """Write the first ``rows`` pending rows as one row group, into the file they belong to."""
        nonlocal pending, written, writer
        table = pa.Table.from_batches(pending, schema=schema)
        if writer is None or written % per_file == 0:
            if writer is not None:
                writer.close()
            writer = pq.ParquetWriter(str(staging / names[written // per_file]), schema, compression="snappy")
        writer.write_table(table.slice(0, rows), row_group_size=rows)
        pending = table.slice(rows).to_batches()
        written += rows

    try:
        for batch in _record_batches(reader, schema_features, columns):
            pending.append(batch)
            while sum(len(part) for part in pending) >= group:
                flush(group)
        left = sum(len(part) for part in pending)
        if left:
            flush(left)
    finally:
        if writer is not None:
            writer.close()
    return names


def _layout(reader: ShardReader) -> dict[str, tuple[np.dtype[Any], tuple[int, ...]]]:
    return {name: (reader.dtype(name), tuple(info["shape"])) for name, info in reader.layout.items()}


def _columns(reader: ShardReader) -> dict[str, str]:
    """The column of each array (`glyphforge.hf.column_names`)."""
    return hf.column_names(_layout(reader), reader.image_name)


def _features(reader: ShardReader, columns: Mapping[str, str]) -> Any:
    """The features of the files: `to_hf`'s (see the module docstring)."""
    layout = {columns[name]: kind for name, kind in _layout(reader).items()}
    names = {columns[name]: table for name, table in names_tables(reader.metadata, reader.layout).items()}
    return hf.features(layout, names, columns[reader.image_name])


def _record_batches(reader: ShardReader, features: Any, columns: Mapping[str, str]) -> Iterator[Any]:
    """Each shard's rows as record batches, in order: `AHEAD` shards decoded and converted on threads meanwhile."""

    def converted(number: int) -> list[Any]:
        shard = {columns[name]: array for name, array in reader.shard(number).items()}
        return list(hf.batches(shard, features))

    with ThreadPoolExecutor(AHEAD, thread_name_prefix="glyphforge-parquet") as pool:
        ahead: deque[Future[list[Any]]] = deque()
        for number in range(len(reader.index)):
            ahead.append(pool.submit(converted, number))
            if len(ahead) > AHEAD:
                yield from ahead.popleft().result()
        while ahead:
            yield from ahead.popleft().result()


def _row_nbytes(reader: ShardReader) -> int:
    return max(1, sum(reader.dtype(name).itemsize * int(np.prod(info["shape"], dtype=np.int64))
                      for name, info in reader.layout.items()))


def _group_rows(reader: ShardReader) -> int:
    return max(1, ROW_GROUP_BYTES // _row_nbytes(reader))


def _file_rows(reader: ShardReader) -> int:
    group = _group_rows(reader)
    return group * max(1, FILE_BYTES // (group * _row_nbytes(reader)))

