"""Where a build's entry goes, chosen once from its context: the local cache store, or a data dir at a URL.

Both destinations take a checked spec and make its missing shards the same way
(`glyphforge.builds.making.fan_out`); they differ in where the shards are written and how the entry
is made of them:

* `LocalDestination`: the cache store of a local data dir (a path, or the path a ``file://``
  URL names): shard files in a shared work dir, joined into one file (`glyphforge.builds.making.local_build`);
* `URLDestination`: a data dir at a writable URL (``s3://``, ``gs://``...): one part per shard,
  uploaded by the workers, with no shared filesystem (`glyphforge.builds.making.url_build`), the
  entry read where it lies (`glyphforge.builds.reading.lookup.open_built`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from glyphforge.builds.making.local_build import build_local
from glyphforge.builds.making.spec import Spec
from glyphforge.builds.reading.dataset import BuiltDataset
from glyphforge.context import DataContext
from glyphforge.session import Session

__all__ = ["Destination", "LocalDestination", "URLDestination", "check_destination", "destination"]


class Destination(Protocol):
    """Where `glyphforge.build` puts a spec's entry, and how it opens it."""

    def build(self, spec: Spec, session: Session | str | None, *, progress: bool,
              session_options: Mapping[str, Any] | None) -> BuiltDataset:
        """Build ``spec`` (checked) here through ``session`` unless its entry is here; return its reader."""
        ...


@dataclass(frozen=True)
class LocalDestination:
    """The cache store of the local data dir of ``context``."""

    context: DataContext

    def build(self, spec: Spec, session: Session | str | None, *, progress: bool,
              session_options: Mapping[str, Any] | None) -> BuiltDataset:
        """Build ``spec`` into the store (`build_local`); return the reader of its entry."""
        return BuiltDataset(build_local(spec, self.context, session, progress=progress,
                                        session_options=session_options))


@dataclass(frozen=True)
class URLDestination:
    """The data dir at the URL of ``context`` (``context.remote``)."""

    context: DataContext

    def build(self, spec: Spec, session: Session | str | None, *, progress: bool,
              session_options: Mapping[str, Any] | None) -> BuiltDataset:
        """Build ``spec`` into the URL (`build_into`); return the reader of its entry where it lies (as `open_built`
        opens it, from the manifest the build wrote or found)."""
        # imported here: building into a URL brings fsspec's uploads (~0.2 s), which `import glyphforge.builds`
        # (every reader) need not pay
        from glyphforge.builds.making.url_build import build_and_open

        return BuiltDataset(build_and_open(spec, self.context, session, progress=progress,
                                           session_options=session_options))


def destination(context: DataContext) -> Destination:
    """The destination of a build with ``context``: its URL data dir if it has one, else its local store."""
    return LocalDestination(context) if context.remote is None else URLDestination(context)


def check_destination(context: DataContext) -> None:
    """Refuse, before any work, a build with ``context`` whose entry cannot go where it says (a command's argument
    check; `glyphforge.build` refuses the same when it starts building into a URL).

    Raises
    ------
    ReadOnlyStoreError
        Its data dir is a URL glyphforge only reads (``https://``).
    UnsupportedURLError
        fsspec cannot open its data dir's scheme here (the message names the extra to install).
    """
    if context.remote is not None:
        from glyphforge.builds.making.url_build import check_writable  # as in `URLDestination.build`: fsspec's uploads

        check_writable(context.remote)
