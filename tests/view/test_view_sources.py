"""The viewer's reading parts in process: the rows kept stay within their bounds, filters pick from the label index."""
from __future__ import annotations

import numpy as np
import pytest

from glyphforge.view import sources
from glyphforge.view.sources import LabelIndex, RowCache, ViewRequestError


def test_the_rows_kept_stay_within_their_count_and_bytes(monkeypatch):
    monkeypatch.setattr(sources, "KEPT_BYTES", 10_000)
    kept = RowCache()
    for index in range(50):
        kept.put(index, {"images": np.zeros(3_000, dtype=np.uint8)})
    assert [i for i in range(50) if kept.get(i) is not None] == [47, 48, 49]  # the last three: 9,000 bytes
    monkeypatch.setattr(sources, "KEPT_BYTES", 2**40)
    for index in range(sources.KEPT_ROWS + 10):
        kept.put(index, {"images": np.zeros(1, dtype=np.uint8)})
    assert sum(kept.get(i) is not None for i in range(sources.KEPT_ROWS + 10)) == sources.KEPT_ROWS


def test_filters_pick_from_the_label_index():
    index = LabelIndex(np.array([[0, 1, -1], [2, -1, -1], [1, 1, 2]]), np.array([2, 1, 3]), None)
    assert index.matching(1, None).tolist() == [0, 2]
    assert index.matching(None, 1).tolist() == [1]
    assert index.matching(2, 3).tolist() == [2]
    with pytest.raises(ViewRequestError, match="only scenes have a number of objects"):
        LabelIndex(np.array([[0], [1]]), None, None).matching(None, 2)
