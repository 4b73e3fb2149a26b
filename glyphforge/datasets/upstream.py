"""The upstream files datasets need, where each goes, and which are missing: for air-gapped machines.

`upstream_files` lists what preparing some datasets (with their options) fetches: each file's
dataset, name, size, hash, every URL, its placement path in the data dir and its path inside
a mirror folder (``<dataset>/<filename>``). It reads the registry only (no network, no file).
`fetch_into` fetches those files into a folder laid out as a mirror; `still_missing` names,
after one file of a dataset failed, every other file of it not in place and on no local mirror.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.pipelines.download import fetch
from glyphforge.pipelines.fetch_all import fetch_all
from glyphforge.pipelines.resource import DownloadError, HashMismatchError, Resource

__all__ = ["UpstreamFile", "fetch_into", "in_the_way", "still_missing", "upstream_files"]


@dataclass(frozen=True)
class UpstreamFile:
    """One upstream file a dataset needs, and where it goes.

    Attributes
    ----------
    resource
        The registered file (dataset, filename, size, hash, URLs).
    place
        Where to put it by hand: ``<data dir>/raw/<dataset>/<filename>``.
    """

    resource: Resource
    place: Path

    @property
    def mirror_path(self) -> str:
        """Its path inside a mirror folder: ``<dataset>/<filename>``."""
        return f"{self.resource.dataset}/{self.resource.filename}"

    @property
    def urls(self) -> tuple[str, ...]:
        """Every origin URL, in the order they are tried (after the mirrors)."""
        return (self.resource.url, *self.resource.more_urls)


def needed(wanted: Mapping[str, Mapping[str, Any]]) -> list[Resource]:
    """The files of each dataset of ``wanted`` (``{name: prepare options}``), in order, each once."""
    found: dict[tuple[str, str], Resource] = {}
    for name, options in wanted.items():
        for resource in registry.needed(name, **options):
            found.setdefault((resource.dataset, resource.filename), resource)
    return list(found.values())


def upstream_files(wanted: Mapping[str, Mapping[str, Any]], context: DataContext) -> list[UpstreamFile]:
    """The files preparing each dataset of ``wanted`` (``{name: prepare options}``) fetches, with their placement
    paths in the context's data dir.

    Raises
    ------
    KeyError
        A dataset is not registered.
    ValueError
        An option's value is not one its dataset takes.
    """
    return [UpstreamFile(resource, context.raw_dir(resource.dataset) / resource.filename)
            for resource in needed(wanted)]


def fetch_into(files: Iterable[UpstreamFile], directory: Path, context: DataContext,
               advice: str = "") -> list[Path]:
    """Fetch ``files`` into ``directory`` laid out as a mirror (``<directory>/<dataset>/<filename>``); return them.

    Each is verified, written atomically and skipped when already there and verified, from the
    context's mirrors and the origins (local mirrors only when offline). A file in the way that
    glyphforge did not write is kept and named.

    Raises
    ------
    DownloadError, HashMismatchError, MissingFilesError
        Files could not be obtained: every one is named at once (see `glyphforge.pipelines.fetch_all`).
    """
    return fetch_all([(file.resource, directory / file.resource.dataset) for file in files],
                     mirrors=context.mirrors, offline=context.offline, progress=context.progress, advice=advice)


def still_missing(name: str, options: Mapping[str, Any], context: DataContext,
                  first: DownloadError) -> list[DownloadError]:
    """``first`` (the failure of one file of dataset ``name``), then the error of each other file ``name`` needs
    with ``options`` that is not in place and on no local mirror (looked for without the network: a file found
    on a local mirror is copied into place). With ``context.verify`` False, a file in place counts as there."""
    missing = [first]
    for resource in registry.needed(name, **options):
        if resource == first.resource:
            continue
        try:
            fetch(resource, context.raw_dir(name), mirrors=context.mirrors, offline=True, progress=context.progress)
        except DownloadError as error:
            if context.verify or not in_the_way(error):  # unverified, a file in place is the user's own copy
                missing.append(error)
    return missing


def in_the_way(error: DownloadError) -> bool:
    """Whether ``error`` is about a file in place that is not upstream's (the user's: kept, never replaced)."""
    target = error.target
    return (isinstance(error, HashMismatchError) and target is not None and target.is_file()
            and any(attempt.source == str(target) for attempt in error.attempts))
