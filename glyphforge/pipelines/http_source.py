"""One HTTP source streamed into a partial file: resuming, retrying, and checking what the server sends.

:func:`download` fills ``<filename>.part`` from one URL. It resumes with a Range request
when the partial file already holds bytes and the server supports it, retries connection
errors, timeouts, 408, 429 and 5xx with exponential backoff honouring Retry-After (see
:class:`RetryPolicy`), refuses a ``text/html`` answer, an announced size that is not the
expected one, and a body longer than it. Verifying the content and choosing between
sources is :func:`glyphforge.pipelines.download.fetch`'s work.
"""
from __future__ import annotations

import email.utils
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

import requests
import urllib3
from tqdm import tqdm

log = logging.getLogger(__name__)

CHUNK_SIZE = 1 << 16
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
_UNSATISFIED_RANGE = re.compile(r"^bytes \*/(\d+)$")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try one HTTP source.

    Attributes
    ----------
    attempts
        Failed attempts in a row (without new bytes arriving) before giving up on a source.
    backoff
        Delay in seconds after the first failure; doubled after each further one.
    max_delay
        Cap in seconds on any one delay, Retry-After included.
    connect_timeout, read_timeout
        Seconds allowed to connect, and between two bytes of an answer.
    """

    attempts: int = 5
    backoff: float = 1.0
    max_delay: float = 60.0
    connect_timeout: float = 10.0
    read_timeout: float = 60.0

    def delay(self, failures: int, retry_after: float | None) -> float:
        """Seconds to wait after the ``failures``-th failure in a row."""
        wanted = retry_after if retry_after is not None else self.backoff * 2 ** (failures - 1)
        return max(0.0, min(wanted, self.max_delay))


DEFAULT_POLICY = RetryPolicy()


@dataclass(frozen=True)
class Attempt:
    """One source that was tried and failed.

    ``actual_hash``, ``actual_size`` and ``final_url`` are set when the source
    delivered a complete file with the wrong content.
    """

    source: str
    reason: str
    actual_hash: str | None = None
    actual_size: int | None = None
    final_url: str | None = None


class SourceFailed(Exception):
    """One source failed; ``attempt`` says which and why (the next source is tried)."""

    def __init__(self, attempt: Attempt) -> None:
        super().__init__(attempt.reason)
        self.attempt = attempt


class Retryable(Exception):
    """A transient failure (timeout, dropped connection, 408, 429, 5xx): the request is tried again."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def download(
    url: str, part: Path, *, size: int | None, label: str, session: requests.Session, policy: RetryPolicy,
    progress: bool,
) -> str:
    """Fill ``part`` from ``url``, resuming what it holds and retrying; return the final URL after redirects.

    Parameters
    ----------
    url
        An ``http://`` or ``https://`` URL.
    part
        The partial file: bytes already in it are kept when the server supports Range requests.
    size
        The expected size in bytes, or None when it is not pinned.
    label
        What the progress bar calls the file (``"emnist/gzip.zip"``).
    session, policy, progress
        The HTTP session, the retries and timeouts, and whether to show a progress bar.

    Raises
    ------
    SourceFailed
        When the source gave up (its ``attempt`` says why); ``part`` may hold a partial file.
    """
    failures = 0
    best = part.stat().st_size if part.is_file() else 0
    while True:
        try:
            return _request(url, part, size, label, session, policy, progress)
        except Retryable as error:
            have = part.stat().st_size if part.is_file() else 0
            failures = 1 if have > best else failures + 1
            best = max(best, have)
            if failures >= policy.attempts:
                raise SourceFailed(
                    Attempt(url, f"gave up after {failures} failed attempts in a row; last: {error.reason}")
                ) from error
            delay = policy.delay(failures, error.retry_after)
            log.info("%s: %s; retrying in %.3g s", url, error.reason, delay)
            time.sleep(delay)


def _request(
    url: str, part: Path, size: int | None, label: str, session: requests.Session, policy: RetryPolicy, progress: bool
) -> str:
    offset = part.stat().st_size if part.is_file() else 0
    headers = {"Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        with session.get(
            url, headers=headers, stream=True, timeout=(policy.connect_timeout, policy.read_timeout)
        ) as response:
            status = f"{response.status_code} {response.reason}"
            if response.status_code == 416 and offset:
                return _range_not_satisfiable(response, part, offset)
            if response.status_code in (408, 429) or response.status_code >= 500:
                raise Retryable(status, _retry_after(response.headers.get("Retry-After")))
            if response.status_code not in (200, 206):
                raise SourceFailed(Attempt(url, status))
            content_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if content_type == "text/html":
                raise SourceFailed(Attempt(
                    url, f"answered with a web page (Content-Type text/html, final URL {response.url}), "
                    "not the file: the address has probably moved",
                ))
            start, total = _body_range(response, part, offset)
            if start != offset:
                log.info("%s does not resume downloads; starting again from byte 0", url)
            if size is not None and total is not None and total != size:
                raise SourceFailed(Attempt(url, f"announces {total} bytes, expected {size}"))
            _stream(response, part, start, total, size, label, progress)
            return response.url
    except (requests.ConnectionError, requests.Timeout, urllib3.exceptions.HTTPError) as error:
        raise Retryable(f"{type(error).__name__}: {error}") from error
    except requests.RequestException as error:
        raise SourceFailed(Attempt(url, f"{type(error).__name__}: {error}")) from error


def _range_not_satisfiable(response: requests.Response, part: Path, offset: int) -> str:
    match = _UNSATISFIED_RANGE.match(response.headers.get("Content-Range", ""))
    if match and int(match.group(1)) == offset:
        return response.url
    part.unlink()
    raise Retryable("416 Range Not Satisfiable: the partial file does not fit the server's; starting again")


def _body_range(response: requests.Response, part: Path, offset: int) -> tuple[int, int | None]:
    """Return (first byte of the body, total file size if known); restart on a surprising range."""
    length = response.headers.get("Content-Length")
    if response.status_code == 200:
        return 0, int(length) if length and length.isdigit() else None
    match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
    if not match or int(match.group(1)) != offset:
        part.unlink(missing_ok=True)
        raise Retryable(
            f"206 with an unexpected Content-Range {response.headers.get('Content-Range')!r}; starting again"
        )
    return offset, int(match.group(3)) if match.group(3) != "*" else None


def _stream(
    response: requests.Response, part: Path, start: int, total: int | None, size: int | None, label: str,
    progress: bool,
) -> None:
    """Append the body to ``part`` as it arrives (``read1``: a dropped connection keeps every byte received)."""
    written = start
    with open(part, "ab" if start else "wb") as out, progress_bar(label, total, start, progress) as bar:
        while chunk := response.raw.read1(CHUNK_SIZE, decode_content=True):
            out.write(chunk)
            written += len(chunk)
            bar.update(len(chunk))
            if size is not None and written > size:
                out.close()
                part.unlink()
                raise SourceFailed(Attempt(response.url, f"sent more than the expected {size} bytes"))


def progress_bar(label: str, total: int | None, initial: int, progress: bool) -> tqdm:
    """Return a tqdm byte progress bar for the file ``label`` (silent unless ``progress``)."""
    return tqdm(
        total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024, desc=label, disable=not progress,
    )


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
