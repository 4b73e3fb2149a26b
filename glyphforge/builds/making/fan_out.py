"""A build's missing shards made through a session, with progress; what every destination's entry says of them.

Both destinations of a build (`glyphforge.builds.making.destinations`) make their missing shards here:
the task mapped over the shard indices differs (`glyphforge.builds.making.shards.ShardTask` writes a
shard file to a shared work dir, a remote build's task uploads a part), the session, the
progress bar, the error naming a failed shard and the entry's meta do not.
"""
from __future__ import annotations

import logging
import sys
from typing import Any, Protocol

from glyphforge._checks import worker_count
from glyphforge.builds.making.shards import ShardRecord, count_shards, images_array, shard_bounds
from glyphforge.builds.making.spec import ShardError, Spec
from glyphforge.session import Session, TaskFailure, check_session, open_session
from glyphforge.textfmt import count

log = logging.getLogger(__name__)


class ShardMaker(Protocol):
    """What a session maps over shard indices: `ShardTask`, or a remote build's task."""

    @property
    def spec(self) -> Any: ...

    def __call__(self, index: int) -> ShardRecord: ...


def make_shards(
    task: ShardMaker, missing: list[int], records: dict[int, ShardRecord], session: Session | str | None,
    session_options: dict[str, Any], progress: bool,
) -> int:
    """Make the ``missing`` shards through ``session`` (opened here from a string); return its worker count."""
    spec = task.spec
    owned = not isinstance(session, Session)
    active = session if isinstance(session, Session) else _open(session or "local", session_options, len(missing))
    try:
        _run_shards(task, missing, records, active, progress)
        return active.n_workers
    except TaskFailure as failure:
        shard = missing[failure.index]
        start, stop = shard_bounds(shard, spec.n_examples, spec.shard_size)
        raise ShardError(
            shard,
            f"shard {shard} of {spec.kind!r} (examples {start} to {stop - 1}) failed: {failure.reason}\n"
            f"The {len(records)} finished shards are kept; run the build again to resume.",
        ) from failure
    finally:
        if owned:
            active.close()


def _open(session: str, options: dict[str, Any], n_tasks: int) -> Session:
    """Open ``session`` with no more local workers than there are shards to make."""
    kind, options = check_session(session, options)
    if kind in ("processes", "dask") and "address" not in options:
        wanted = worker_count(options.get("n_workers"))
        if wanted > n_tasks:
            log.info("starting %s, not %d: only %s to make", count(n_tasks, "worker", "workers"), wanted,
                     count(n_tasks, "shard", "shards"))
        options["n_workers"] = min(wanted, n_tasks)
    return open_session(kind, **options)


def _run_shards(
    task: ShardMaker, missing: list[int], records: dict[int, ShardRecord], session: Session, progress: bool
) -> None:
    """Map ``task`` over the ``missing`` shards, adding each finished one to ``records``."""
    from tqdm import tqdm

    spec = task.spec
    n_shards = count_shards(spec.n_examples, spec.shard_size)
    done_examples = sum(record["n"] for record in records.values())
    with tqdm(total=spec.n_examples, initial=done_examples, unit="ex", unit_scale=True,
              desc=f"{spec.kind}", disable=not progress, file=sys.stderr) as bar:
        bar.set_postfix_str(f"shards {len(records)}/{n_shards}")
        for _, record in session.map(task, missing):
            records[record["shard"]] = record
            bar.update(record["n"])
            bar.set_postfix_str(f"shards {len(records)}/{n_shards}")


def common_layout(records: dict[int, ShardRecord], kind: str) -> dict[str, Any]:
    """Return the array layout all shards share, or raise naming the first shard that differs."""
    first = records[0]["layout"]
    for index in sorted(records):
        if records[index]["layout"] != first:
            raise ShardError(
                index,
                f"shard {index} of {kind!r} returned arrays {records[index]['layout']} but shard 0 "
                f"returned {first}; make_shard must return the same names, dtypes and per-example "
                "shapes for every shard",
            )
    return first


def entry_meta(spec: Spec, records: dict[int, ShardRecord]) -> dict[str, Any]:
    """What a built entry's meta says of its shards (``records``, all of them), on either destination."""
    metadata = records[0].get("metadata", {})
    return {
        "n_examples": int(spec.n_examples),
        "n_shards": len(records),
        "layout": common_layout(records, spec.kind),
        "metadata": metadata,
        "images": images_array(records[0]["layout"], metadata, spec.kind),
    }


def report(summary: str, progress: bool) -> None:
    """Say a build's one-line ``summary``: on stderr with ``progress``, else to the log."""
    if progress:
        print(summary, file=sys.stderr)
    else:
        log.info(summary)
