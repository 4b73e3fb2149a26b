"""Real tmpfs mounts for tests of full, read-only and separate disks (root only: skipped, saying why, elsewhere)."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(mount_point: Path, options: str) -> Iterator[Path]:
    """Mount a tmpfs with ``options`` on ``mount_point`` (created if missing) for the block; skip when not permitted."""
    mount_point.mkdir(exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"mounting a tmpfs is not permitted here (needs root and mount(8)): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs at ``tmp_path / "small"`` for the test (``mount -o remount,size=...`` resizes it)."""
    with tmpfs(tmp_path / "small", "size=1m") as path:
        yield path
