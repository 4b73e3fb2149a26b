"""``glyphforge view`` run as a real subprocess, and headless Chromium (Debian's ``chromium`` and ``chromium-driver``)
driven by selenium, for the viewer's tests.

:func:`running_viewer` starts ``python -m glyphforge view --no-browser`` and yields the address it prints.
:func:`headless_chromium` yields a selenium driver of ``/usr/bin/chromium`` through ``/usr/bin/chromedriver``,
headless with a fresh profile; without them (or selenium) the test skips saying why, unless
``GLYPHFORGE_REQUIRE_CHROMIUM=1`` (set by ``.ci/run``, which installs them) makes that a failure.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
#: Set (by CI) to turn "no Chromium here" from a skip into a failure.
REQUIRE_ENV = "GLYPHFORGE_REQUIRE_CHROMIUM"
#: Headless, and nothing reached for beyond the page under test.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,900")


@dataclass
class Viewer:
    """A running viewer: the address it printed (its page's root), the line it printed, its process, and once it
    has stopped what it wrote to stderr."""

    address: str
    said: str
    process: subprocess.Popen[str]
    errors: str = ""


@contextmanager
def running_viewer(data_dir: Path | str, *args: str) -> Iterator[Viewer]:
    """Run ``glyphforge view --no-browser --data-dir data_dir *args``; yield it once it has printed its address."""
    process = subprocess.Popen([sys.executable, "-m", "glyphforge", "view", "--no-browser", "--data-dir",
                                str(data_dir), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"http://\S+/", line)
    if found is None:
        process.kill()
        raise AssertionError(f"glyphforge view printed no address: {line!r}; stderr: {process.communicate()[1]}")
    running = Viewer(found.group(0), line, process)
    try:
        yield running
    finally:
        process.terminate()
        try:
            running.errors = process.communicate(timeout=20)[1]
        except subprocess.TimeoutExpired:  # never left behind, even stuck
            process.kill()
            running.errors = process.communicate()[1]


def chromium_missing() -> str | None:
    """Why headless Chromium cannot run here, or None when it can."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        return (f"no {' or '.join(missing)}: install Debian's chromium and chromium-driver "
                "(`apt-get install chromium chromium-driver`, as .ci/run does)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install -e '.[test]'"
    return None


@contextmanager
def headless_chromium(profile: Path) -> Iterator[Any]:
    """A selenium driver of headless Chromium with the fresh profile dir ``profile``; skip (or fail) without one."""
    reason = chromium_missing()
    if reason is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()
