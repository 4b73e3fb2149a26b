"""Small numpy-only build specs for the session and builder tests."""
from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge.cache import Entry
from glyphforge.context import DataContext

#: Seconds a held shard waits to be stopped before it raises (so a test that forgets it cannot hang).
HOLD_TIMEOUT = 120.0


@dataclass
class NoiseSpec:
    """Random glyph-like arrays; knobs that do not change the output stay out of params().

    Parameters
    ----------
    delay
        Seconds each shard sleeps (keeps a build running long enough to interrupt).
    touch_dir
        When set, every make_shard call creates a file ``made-<shard>-<pid>-<SLURM job
        id or 0>-<unique>`` there, so a test can count the shards that were actually
        made, and by which process and batch job.
    fail_shard
        Shard index whose make_shard raises ValueError.
    hold_shard
        Shard index whose first make_shard call, once recorded, creates ``holding-<shard>``
        in ``touch_dir`` (holding its pid; see :func:`holder_of`) and waits there, sleeping
        in Python code (so a SIGINT raises KeyboardInterrupt at once), for its process to be
        stopped: a test stops a build at a known point, whatever the load. A later call (the
        shard made again elsewhere) finds the file and goes on. After :data:`HOLD_TIMEOUT`
        the held call raises TimeoutError.
    """

    n_examples: int = 50
    shard_size: int = 8
    seed: int = 0
    delay: float = 0.0
    touch_dir: str | None = None
    fail_shard: int | None = None
    hold_shard: int | None = None
    kind: str = "test-noise"

    def params(self) -> dict[str, Any]:
        return {"version": 1, "fail_shard": self.fail_shard}

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        if self.touch_dir is not None:
            job = os.environ.get("SLURM_JOB_ID", "0")
            Path(self.touch_dir, f"made-{index:04d}-{os.getpid()}-{job}-{uuid.uuid4().hex[:8]}").touch()
        if index == self.fail_shard:
            raise ValueError(f"shard {index} refuses to be made")
        if index == self.hold_shard:
            self._hold(index)
        time.sleep(self.delay)
        return {
            "images": rng.integers(0, 256, size=(n, 6, 5), dtype=np.uint8),
            "labels": rng.integers(0, 10, size=n).astype(np.int16),
            "shard": np.full(n, index, dtype=np.int32),
        }

    def _hold(self, index: int) -> None:
        assert self.touch_dir is not None, "hold_shard needs touch_dir"
        draft = Path(self.touch_dir, f".holding-{index:04d}-{uuid.uuid4().hex}")
        draft.write_text(str(os.getpid()))
        try:
            os.link(draft, Path(self.touch_dir, f"holding-{index:04d}"))  # atomic, with its content
        except FileExistsError:
            return  # made again after its first maker was stopped
        finally:
            draft.unlink()
        deadline = time.monotonic() + HOLD_TIMEOUT
        while time.monotonic() < deadline:
            time.sleep(0.05)
        raise TimeoutError(f"shard {index} was held for {HOLD_TIMEOUT:g} s and nothing stopped the build")


#: The cache kinds of what `TableSpec`'s prepare makes: the table its shards read, and notes they do not.
TABLE_KIND, NOTES_KIND = "test-table", "test-notes"


@dataclass
class TableSpec(NoiseSpec):
    """`NoiseSpec` whose shards add a column read from a table its prepare puts in the build's cache.

    The prepare also makes (and reads) a notes entry the shards never read, and returns only the table's
    entry: the input a build into a URL publishes for its workers. A shard whose table is not in its data
    dir's cache fails naming it.
    """

    kind: str = "test-table-noise"

    def prepare(self, context: DataContext) -> list[Entry]:
        store = context.store
        notes = store.get_or_create(NOTES_KIND, {"seed": self.seed}, lambda writer: writer.write("notes.pklz", "x"))
        notes.load("notes.pklz")
        return [store.get_or_create(TABLE_KIND, {"seed": self.seed}, self._write_table)]

    def _write_table(self, writer: Any) -> None:
        writer.write("table.pklz", np.arange(self.n_examples, dtype=np.int64) * 7 + self.seed)

    def make_shard(self, index: int, rng: np.random.Generator, n: int, *, data_dir: Any = None
                   ) -> dict[str, np.ndarray]:
        table = DataContext.resolve(data_dir=data_dir).store.get(TABLE_KIND, {"seed": self.seed})
        if table is None:
            raise FileNotFoundError(f"the {TABLE_KIND} entry is not in the cache of {data_dir}: prepare it first")
        start = index * self.shard_size
        return {**super().make_shard(index, rng, n), "table": table.load("table.pklz")[start:start + n]}


def shard_makers(touch_dir: Path, shard: int) -> list[tuple[int, str]]:
    """Return ``(pid, SLURM job id)`` of every process that started making ``shard``."""
    return [(int(path.name.split("-")[2]), path.name.split("-")[3]) for path in touch_dir.glob(f"made-{shard:04d}-*")]


def holder_of(touch_dir: Path, shard: int) -> int | None:
    """Return the pid of the process holding ``shard`` (``NoiseSpec.hold_shard``), None until one does."""
    try:
        return int(Path(touch_dir, f"holding-{shard:04d}").read_text())
    except FileNotFoundError:
        return None


def made_shards(touch_dir: Path) -> list[int]:
    """Return the shard index of every make_shard call recorded in ``touch_dir``, sorted."""
    return sorted(int(path.name.split("-")[1]) for path in touch_dir.glob("made-*"))


def assert_shard_6_fails_with_its_traceback(session: Any, data_dir: Path) -> None:
    """Build a spec whose shard 6 raises through ``session``; check the error names it and caches nothing."""
    import pytest

    from glyphforge.builds import ShardError, build, cache_params
    from glyphforge.cache import CacheStore

    spec = NoiseSpec(n_examples=40, shard_size=4, fail_shard=6)
    with pytest.raises(ShardError) as error:
        build(spec, session=session, data_dir=data_dir, progress=False)
    message = str(error.value)
    assert error.value.shard == 6
    assert message.startswith("shard 6 of 'test-noise' (examples 24 to 27) failed: it raised an exception; "
                              "the traceback from its worker:\nTraceback (most recent call last):")
    assert 'raise ValueError(f"shard {index} refuses to be made")' in message
    assert "ValueError: shard 6 refuses to be made\n" in message
    assert "run the build again to resume" in message
    assert CacheStore.for_data_dir(data_dir).get(spec.kind, cache_params(spec)) is None


@dataclass
class RowSpec:
    """Rows that name themselves: ``row`` is each example's global index, ``images`` derived from it.

    For tests of readers: any access path's result says exactly which rows it holds.
    """

    n_examples: int = 1030
    shard_size: int = 100
    seed: int = 0
    kind: str = "test-rows"

    def params(self) -> dict[str, Any]:
        return {"version": 1}

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        rows = index * self.shard_size + np.arange(n, dtype=np.int64)
        images = (rows[:, None, None] * np.arange(1, 13, dtype=np.int64).reshape(1, 3, 4)) % 251
        return {"images": images.astype(np.uint8), "row": rows, "name": np.array([f"r{r}" for r in rows], "<U5")}


@dataclass
class WideRowSpec(RowSpec):
    """`RowSpec` with 64x64x3 images (12 KB a row, compressing well): a decoded copy of megabytes from a small entry."""

    n_examples: int = 2000
    kind: str = "test-wide-rows"

    def params(self) -> dict[str, Any]:
        return {"version": 1, "side": 64}

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        rows = index * self.shard_size + np.arange(n, dtype=np.int64)
        images = (rows[:, None] + np.arange(64 * 64 * 3, dtype=np.int64)[None, :] // 97) % 251
        return {"images": images.astype(np.uint8).reshape(n, 64, 64, 3), "row": rows}


@dataclass
class DigitSpec(RowSpec):
    """`RowSpec`'s images with one label each, named by ``class_names``: a single-image, single-label dataset (MNIST's
    form), whose Hugging Face columns are ``image`` and ``label``."""

    n_examples: int = 57
    shard_size: int = 20
    kind: str = "test-digits"

    def metadata(self, *, data_dir: Any = None) -> dict[str, Any]:
        return {"class_names": ["zero", "one", "two"]}

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        shard = super().make_shard(index, rng, n)
        return {"images": shard["images"], "labels": shard["row"] % 3}
