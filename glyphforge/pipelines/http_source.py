"""One HTTP source streamed into a partial file: resuming, retrying, and checking what the server sends.

:func:`download` fills ``<filename>.part`` from one URL. It resumes with a Range request
when the partial file already holds bytes and the server supports it, retries connection
errors, timeouts, 408, 429 and 5xx with exponential backoff honouring Retry-After (see
:class:`glyphforge.storage.retries.RetryPolicy`), but not a host name that does not resolve (no network or no DNS here:
waiting does not help, and the next source is tried at once), refuses a ``text/html``
answer, an announced size that is not the expected one, a body longer than it, an answer
slower than ``RetryPolicy.min_rate`` and a source still unfinished at ``RetryPolicy.deadline``.
Waiting is never silent: each retry and, every ``RetryPolicy.report_every`` seconds, an
unfinished download are logged at INFO. Verifying the content and choosing between sources
is :func:`glyphforge.pipelines.download.fetch`'s work.
"""
from __future__ import annotations

import logging
import math
import socket
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from glyphforge._files import writing
from glyphforge.storage.retries import RetryPolicy, content_range, retry_after
from glyphforge.textfmt import human_size
from glyphforge.urls import redacted

if TYPE_CHECKING:
    import requests
    from tqdm import tqdm

log = logging.getLogger(__name__)

CHUNK_SIZE = 1 << 16


@dataclass(frozen=True)
class Attempt:
    """One source that was tried and failed.

    ``actual_hash``, ``actual_size`` and ``final_url`` are set when the source
    delivered a complete file with the wrong content; ``unresolved_host`` when its host
    name did not resolve (no network or no DNS), the host. Its texts are shown in messages: the
    source, the reason and the final URL are kept without their secrets (`glyphforge.urls.redacted`).
    """

    source: str
    reason: str
    actual_hash: str | None = None
    actual_size: int | None = None
    final_url: str | None = None
    unresolved_host: str | None = None

    def __post_init__(self) -> None:
        for name in ("source", "reason", "final_url"):
            text = getattr(self, name)
            if text is not None:
                object.__setattr__(self, name, redacted(text))


@dataclass(frozen=True)
class Fetched:
    """What :func:`download` got.

    Attributes
    ----------
    final_url
        The URL after redirects.
    resumed
        Whether a Range request completed the file, so that part of it came from an
        earlier answer or an earlier run.
    """

    final_url: str
    resumed: bool


class _SourceFailed(Exception):
    """One source failed; ``attempt`` says which and why (the next source is tried)."""

    def __init__(self, attempt: Attempt) -> None:
        super().__init__(attempt.reason)
        self.attempt = attempt


class _Retryable(Exception):
    """A transient failure (timeout, dropped connection, 408, 429, 5xx): the request is tried again.

    ``reason`` is the whole story (for the final error), ``short`` the status code or the
    error's type (for the retry log line).
    """

    def __init__(self, reason: str, retry_after: float | None = None, short: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.short = short or reason


def download(
    url: str, part: Path, *, size: int | None, label: str, session: requests.Session, policy: RetryPolicy,
    progress: bool,
) -> Fetched:
    """Fill ``part`` from ``url``, resuming what it holds and retrying.

    Parameters
    ----------
    url
        An ``http://`` or ``https://`` URL.
    part
        The partial file: bytes already in it are kept when the server supports Range requests.
    size
        The expected size in bytes, or None when it is not pinned.
    label
        What the progress bar and the log lines call the file (``"emnist/gzip.zip"``).
    session, policy, progress
        The HTTP session, the retries, timeouts and rates, and whether to show a progress bar.

    Returns
    -------
    Fetched
        The final URL after redirects, and whether the file was completed by a resume.

    Raises
    ------
    _SourceFailed
        When the source gave up (its ``attempt`` says why); ``part`` may hold a partial file.
    StorageError
        When ``part`` cannot be written (disk full, read-only, forbidden); it is kept for a resume.
    """
    watch = _Watch(url, label, policy)
    failures = 0
    best = _size(part)
    while True:
        watch.check_deadline(_size(part), size)
        try:
            return _request(url, part, size, session, watch, progress)
        except _Retryable as error:
            have = _size(part)
            failures = 1 if have >= best + CHUNK_SIZE else failures + 1
            best = max(best, have)
            if failures >= policy.attempts:
                raise _SourceFailed(
                    Attempt(url, f"gave up after {failures} failed attempts in a row; last: {error.reason}")
                ) from error
            delay = policy.delay(failures, error.retry_after)
            watch.check_deadline(have, size, pause=delay, last=error.reason)
            retry, seconds = failures + 1, _seconds(delay)
            log.info("%s from %s, retry %d/%d in %s s", redacted(error.short), redacted(url), retry, policy.attempts,
                     seconds)
            time.sleep(delay)


class _Watch:
    """The clock of one download from one source: its deadline, its minimum rate, and its progress lines."""

    def __init__(self, url: str, label: str, policy: RetryPolicy) -> None:
        self.url, self.label, self.policy = url, label, policy
        self.started = self.reported = time.monotonic()
        self.received = 0  # bytes received from this source in this run
        self.samples: deque[tuple[float, int]] = deque()  # (time, bytes in the file) within the current answer

    def timeouts(self) -> tuple[float, float]:
        """The (connect, read) timeouts of the next request, cut to the time left before the deadline."""
        left = math.inf if self.policy.deadline is None else self.policy.deadline - self._elapsed()
        return min(self.policy.connect_timeout, left), min(self.policy.read_timeout, left)

    def check_deadline(self, have: int, total: int | None, *, pause: float = 0.0, last: str | None = None) -> None:
        """Give up on the source when the deadline has passed, or would pass during ``pause`` seconds."""
        deadline = self.policy.deadline
        elapsed = self._elapsed()
        if deadline is None or elapsed + pause < deadline:
            return
        waiting = f"; last: {last}, with a retry due in {_seconds(pause)} s" if last else ""
        raise _SourceFailed(Attempt(self.url, (
            f"not complete within the deadline of {_seconds(deadline)} s (RetryPolicy.deadline): "
            f"{self._progress(have, total, elapsed)}{waiting}; {_advice(have, 'give a larger deadline')}"
        )))

    def answer(self, start: int) -> None:
        """Start judging a new answer whose body begins at byte ``start``."""
        self.samples = deque([(time.monotonic(), start)])

    def chunk(self, nbytes: int, have: int, total: int | None) -> None:
        """Account for ``nbytes`` just written (``have`` in the file now); enforce the rates, report progress."""
        self.received += nbytes
        self.check_deadline(have, total)
        now, window = time.monotonic(), self.policy.rate_window
        if now - self.samples[-1][0] >= window / 10:  # a few samples per window are enough
            self.samples.append((now, have))
        while len(self.samples) > 1 and self.samples[1][0] <= now - window:
            self.samples.popleft()
        since, had = self.samples[0]
        span, got = now - since, have - had
        if span >= window and got < self.policy.min_rate * span:
            raise _SourceFailed(Attempt(self.url, (
                f"too slow: {human_size(got)} in the last {_seconds(span)} s ({human_size(int(got / span))}/s), "
                f"below the minimum of {human_size(int(self.policy.min_rate))}/s (RetryPolicy.min_rate); "
                f"{_advice(have, 'accept slower transfers with a lower min_rate')}"
            )))
        if now - self.reported >= self.policy.report_every and (total is None or have < total):
            self.reported = now
            log.info("%s: %s from %s", self.label, self._progress(have, total, self._elapsed()), redacted(self.url))

    def _progress(self, have: int, total: int | None, elapsed: float) -> str:
        """``"12.3 MB of 562.0 MB after 30 s (410.0 KB/s)"``."""
        of = human_size(total) if total is not None else "an unknown size"
        rate = human_size(int(self.received / elapsed)) if elapsed > 0 else "?"
        return f"{human_size(have)} of {of} after {_seconds(elapsed)} s ({rate}/s)"

    def _elapsed(self) -> float:
        return time.monotonic() - self.started


def _request(
    url: str, part: Path, size: int | None, session: requests.Session, watch: _Watch, progress: bool
) -> Fetched:
    import requests  # here, not at the top: importing it costs ~0.1 s, and most runs download nothing
    import urllib3

    offset = _size(part)
    headers = {"Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        with session.get(url, headers=headers, stream=True, timeout=watch.timeouts()) as response:
            status = f"{response.status_code} {response.reason}"
            if response.status_code == 416 and offset:
                return _range_not_satisfiable(response, part, offset)
            if response.status_code in (408, 429) or response.status_code >= 500:
                raise _Retryable(status, retry_after(response.headers.get("Retry-After")),
                                 short=str(response.status_code))
            if response.status_code not in (200, 206):
                raise _SourceFailed(Attempt(url, status))
            content_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if content_type == "text/html":
                raise _SourceFailed(Attempt(
                    url, f"answered with a web page (Content-Type text/html, final URL {response.url}), "
                    "not the file: the address has probably moved",
                ))
            start, total = _body_range(response, part, offset)
            if start != offset:
                log.info("%s does not resume downloads; starting again from byte 0", redacted(url))
            if size is not None and total is not None and total != size:
                raise _SourceFailed(Attempt(url, f"announces {total} bytes, expected {size}"))
            _stream(response, part, start, total if total is not None else size, size, watch, progress)
            return Fetched(response.url, resumed=start > 0)
    except (requests.ConnectionError, requests.Timeout, urllib3.exceptions.HTTPError) as error:
        unresolved = _name_resolution_error(error)
        if unresolved is not None:  # no network or no DNS: retrying only waits (the next source is tried at once)
            host = urlsplit(url).hostname or url
            raise _SourceFailed(Attempt(url, f"the host name {host} does not resolve ({unresolved}): this machine has "
                                       "no network or no DNS (not retried)", unresolved_host=host)) from error
        raise _Retryable(f"{type(error).__name__}: {error}", short=type(error).__name__) from error
    except requests.RequestException as error:
        raise _SourceFailed(Attempt(url, f"{type(error).__name__}: {error}")) from error


def no_network_advice(attempts: Iterable[Attempt], dataset: str, folder: Path) -> list[str]:
    """What to do when hosts of ``attempts`` did not resolve: files of ``dataset`` placed in ``folder`` and
    ``--offline``, or a mirror (one line; none when every host resolved)."""
    hosts = list(dict.fromkeys(attempt.unresolved_host for attempt in attempts if attempt.unresolved_host))
    return [
        f"{', '.join(hosts)} did not resolve: this machine has no network (or no DNS). To work without it, place the "
        f"files of {dataset} in {folder} and run with --offline (offline=True, GLYPHFORGE_OFFLINE=1), or give a "
        "mirror this machine can reach (--mirror URL or GLYPHFORGE_MIRROR: a directory or file:// URL on a shared file "
        "system, or an https://, s3:// or gs:// URL)."
    ] if hosts else []


def _name_resolution_error(error: BaseException) -> socket.gaierror | None:
    """The `socket.gaierror` behind ``error`` (requests' and urllib3's wrappers, their causes), or None."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        found = pending.pop()
        if isinstance(found, socket.gaierror):
            return found
        if id(found) in seen:
            continue
        seen.add(id(found))
        linked = (found.__cause__, found.__context__, getattr(found, "reason", None), *found.args)
        pending.extend(item for item in linked if isinstance(item, BaseException))
    return None


def _range_not_satisfiable(response: requests.Response, part: Path, offset: int) -> Fetched:
    answered = content_range(response.headers.get("Content-Range"))
    if answered is not None and answered.first is None and answered.total == offset:
        return Fetched(response.url, resumed=True)
    part.unlink()
    raise _Retryable("416 Range Not Satisfiable: the partial file does not fit the server's; starting again",
                     short="416")


def _body_range(response: requests.Response, part: Path, offset: int) -> tuple[int, int | None]:
    """Return (first byte of the body, total file size if known); restart on a surprising range."""
    length = response.headers.get("Content-Length")
    if response.status_code == 200:
        return 0, int(length) if length and length.isdigit() else None
    answered = content_range(response.headers.get("Content-Range"))
    if answered is None or answered.first != offset:
        part.unlink(missing_ok=True)
        raise _Retryable(
            f"206 with an unexpected Content-Range {response.headers.get('Content-Range')!r}; starting again",
            short="206 with an unexpected Content-Range",
        )
    return offset, answered.total


def _stream(
    response: requests.Response, part: Path, start: int, total: int | None, size: int | None, watch: _Watch,
    progress: bool,
) -> None:
    """Append the body to ``part`` as it arrives (``read1``: a dropped connection keeps every byte received)."""
    written = start
    watch.answer(start)
    with writing(part), open(part, "ab" if start else "wb") as out, \
            progress_bar(watch.label, total, start, progress) as bar:
        while chunk := response.raw.read1(CHUNK_SIZE, decode_content=True):
            out.write(chunk)
            written += len(chunk)
            bar.update(len(chunk))
            if size is not None and written > size:
                out.close()
                part.unlink()
                raise _SourceFailed(Attempt(response.url, f"sent more than the expected {size} bytes"))
            watch.chunk(len(chunk), written, total)


def progress_bar(label: str, total: int | None, initial: int, progress: bool) -> tqdm:
    """Return a tqdm byte progress bar for the file ``label`` (silent unless ``progress``)."""
    from tqdm import tqdm  # where a bar is made: importing it costs a cold start ~20 ms
    return tqdm(
        total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024, desc=label, disable=not progress,
    )


def _advice(have: int, alternative: str) -> str:
    """What to do when a source is too slow: resume later, another source, or ``alternative``."""
    kept = "the partial file is kept: run again to resume, " if have else ""
    return f"{kept}use a mirror (--mirror URL or $GLYPHFORGE_MIRROR), or {alternative}"


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def _seconds(value: float) -> str:
    """``"4"``, ``"0.25"``, ``"331"``: seconds for a message, without false precision."""
    return f"{value:.0f}" if value >= 10 else f"{value:.2f}".rstrip("0").rstrip(".")

