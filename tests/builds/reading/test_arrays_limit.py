"""How much ``ds.arrays`` may decode by default: half the available memory, measured wherever the system tells it."""
from __future__ import annotations

import os

import numpy as np
import pytest

import glyphforge.builds.reading.memory as memory
from glyphforge.builds import build
from glyphforge.builds.reading.dataset import DatasetTooLargeError
from glyphforge.builds.reading.memory import FALLBACK_ARRAYS_LIMIT, default_arrays_limit

from support.specs import RowSpec


def test_half_of_memavailable_on_linux(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  8000000 kB\nMemFree:  100 kB\nMemAvailable:  2048 kB\n", encoding="ascii")
    monkeypatch.setattr(memory, "MEMINFO", str(meminfo))
    assert default_arrays_limit() == 1024 * 1024


@pytest.mark.skipif(not hasattr(os, "sysconf"), reason="os.sysconf exists on Unix systems only")
def test_half_of_the_physical_memory_without_meminfo(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "MEMINFO", str(tmp_path / "absent"))
    assert default_arrays_limit() == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2


def test_the_documented_default_where_memory_cannot_be_measured(tmp_path, monkeypatch):
    """Windows has neither /proc/meminfo nor os.sysconf: 4 GiB, and ds.arrays still works within it."""
    monkeypatch.setattr(memory, "MEMINFO", str(tmp_path / "absent"))
    monkeypatch.delattr(os, "sysconf", raising=False)
    assert default_arrays_limit() == FALLBACK_ARRAYS_LIMIT == 4 * 1024**3
    built = build(RowSpec(n_examples=30, shard_size=10), data_dir=tmp_path, progress=False)
    assert np.array_equal(built.reopened().arrays["row"], np.arange(30))
    monkeypatch.setattr(memory, "FALLBACK_ARRAYS_LIMIT", 100)
    with pytest.raises(DatasetTooLargeError, match=r"ds\.arrays may fill"):
        _ = built.reopened().arrays
