"""Several upstream files fetched in one go, every one that fails named at once: `fetch_all`, `MissingFilesError`.

One missing file per run is no way to fill an air-gapped cluster: `fetch_all` tries every
file (each as `glyphforge.pipelines.download.fetch` does: verified, written atomically, a
verified file in place skipped, a file glyphforge did not write never replaced) and raises
one `MissingFilesError` naming every file no source gave, each with its placement path,
its URLs and why each source failed.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from glyphforge.pipelines.download import fetch
from glyphforge.pipelines.resource import DownloadError, Resource
from glyphforge.textfmt import human_size

__all__ = ["MissingFilesError", "fetch_all", "missing_files"]


class MissingFilesError(DownloadError):
    """Several upstream files could not be obtained; the message names each, where to place it and what to do.

    Attributes
    ----------
    errors
        The `DownloadError` of each missing file, in order (``resource``, ``target``, ``attempts`` each).
    """

    def __init__(self, message: str, errors: Sequence[DownloadError]) -> None:
        first = errors[0]
        super().__init__(message, resource=first.resource, target=first.target, mirrors=first.mirrors,
                         attempts=tuple(attempt for error in errors for attempt in error.attempts))
        self.errors = tuple(errors)


def fetch_all(
    wanted: Iterable[tuple[Resource, Path]],
    *,
    mirrors: Iterable[str | os.PathLike[str]] | str | None = (),
    offline: bool | None = None,
    progress: bool = True,
    advice: str = "",
) -> list[Path]:
    """Fetch each resource into its directory (``(resource, directory)`` pairs); return the files, in order.

    Every file is tried, whatever happened to the ones before.

    Raises
    ------
    DownloadError, HashMismatchError
        One file was missing: its own error, as `fetch` raises it.
    MissingFilesError
        Several were: one error naming them all (`missing_files`, with ``advice``).
    """
    found, failed = [], []
    for resource, directory in wanted:
        try:
            found.append(fetch(resource, directory, mirrors=mirrors, offline=offline, progress=progress))
        except DownloadError as error:
            failed.append(error)
    if len(failed) == 1:
        raise failed[0]  # its own message says it all
    if failed:
        raise missing_files(failed, advice)
    return found


def missing_files(errors: Sequence[DownloadError], advice: str, *, first_in_full: bool = False) -> MissingFilesError:
    """The error naming the file of each of ``errors`` (one or more), then ``advice``.

    Each file gets one line: its dataset and name, size and hash, the path where to place it
    by hand, its origin URLs and why each source tried failed. ``first_in_full``: the first
    error's whole message follows (why it failed, and what to do without the network), and its
    line does not repeat the sources. ``advice`` is left out when only what is at the files' places stopped them.
    """
    sizes = [error.resource.size if error.resource is not None else None for error in errors]
    total = human_size(sum(size or 0 for size in sizes)) + (" or more" if None in sizes else "")
    lines = [f"{len(errors)} upstream files ({total}) are missing: they are not in place and no "
             "source this run used gave them. Each, with where to place it by hand and where it comes from:"]
    lines += [f"  - {_described(error, below=first_in_full and index == 0)}" for index, error in enumerate(errors)]
    if advice and not all(_in_the_way(error) for error in errors):  # no source is to blame for what is in the way
        lines.append(advice)
    if first_in_full:
        lines.append(f"The first of them in full: {errors[0]}")
    return MissingFilesError("\n".join(lines), errors)


def _in_the_way(error: DownloadError) -> bool:
    """Whether ``error`` is only about what is at the file's place (a file not upstream's, a directory): no source
    was to blame."""
    return error.target is not None and bool(error.attempts) and all(
        attempt.source == str(error.target) for attempt in error.attempts)


def _described(error: DownloadError, below: bool) -> str:
    """One line for the file of ``error``: what it is, where it goes, where it comes from, why it is missing
    (``below``: said further down)."""
    resource, target = error.resource, error.target
    if resource is None:
        return str(error).splitlines()[0]
    size = "size not registered" if resource.size is None else human_size(resource.size)
    urls = " or ".join((resource.url, *resource.more_urls))
    if below:
        tried = "see below"
    elif target is not None and any(attempt.source == str(target) and attempt.actual_hash  # a file in the way
                                    for attempt in error.attempts):
        tried = (f"the file in place is not upstream's ({error.attempts[0].actual_hash}), and glyphforge never "
                 "replaces a file it did not write: move it away, or use it as your own copy with --no-verify")
    else:
        tried = "; ".join(f"{attempt.source}: {attempt.reason}" for attempt in error.attempts) or (
            "not in place, and on no local mirror")
    return (f"{resource.dataset}/{resource.filename} ({size}, {resource.hash}): place it at {target}; "
            f"from {urls} ({tried})")
