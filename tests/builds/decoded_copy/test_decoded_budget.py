"""Nothing big is written without saying so (#30, row 19): an automatic decoded copy is announced, within a budget.

A shuffled map-style read (``DataLoader(ds, shuffle=True)``, ``ds[i]`` in random order) of a
real build thrashes the LRU of decoded shards, so ``random_access="auto"`` wants a decoded copy:
a WARNING gives its size and place before a byte of it is written; beyond the budget
(``decoded_budget=``, ``$GLYPHFORGE_DECODED_BUDGET``, else a part of the free space) no copy
is written and one WARNING says how to allow it. Explicit requests ignore the budget.
"""
from __future__ import annotations

import importlib.util
import logging
import pickle
import shutil

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.builds import BuiltDataset, build
from glyphforge.builds.decoded_copy import source as copy_source
from glyphforge.builds.decoded_copy.life import copy_nbytes, decoded_dir
from glyphforge.textfmt import human_size

from support.optional import NO_TORCH
from support.specs import RowSpec

ROWS = 1030


@pytest.fixture
def rows(tmp_path) -> BuiltDataset:
    """A fresh build of `RowSpec` (11 shards, more than the LRU of 4 holds) in this test's own data dir."""
    return build(RowSpec(), data_dir=tmp_path / "data", progress=False)


def beside(dataset: BuiltDataset) -> list[str]:
    """The decoded copy and its staging directories beside the entry, if any."""
    return sorted(path.name for path in dataset.path.parent.iterdir() if ".decoded" in path.name and
                  not path.name.endswith((".lock", ".holder")))


def shuffled_reads(reader: BuiltDataset) -> None:
    """What a shuffled map-style loader does: rows in random order, one at a time and in batches (all checked)."""
    order = np.random.default_rng(4).permutation(ROWS)
    for i in order[:300].tolist():
        assert reader[i][1]["row"] == i
    for start in range(0, ROWS, 256):
        assert reader.take(order[start:start + 256])["row"].tolist() == order[start:start + 256].tolist()


def warnings(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


class Beside(logging.Handler):
    """Keeps each WARNING of glyphforge with what was beside the entry when it was logged."""

    def __init__(self, dataset: BuiltDataset) -> None:
        super().__init__(logging.WARNING)
        self.dataset, self.seen = dataset, []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append((record.getMessage(), beside(self.dataset)))


def test_a_shuffled_dataloader_announces_the_copy_before_writing_it(rows):
    if importlib.util.find_spec("torch") is None:
        pytest.skip(NO_TORCH)
    from torch.utils.data import DataLoader

    handler = Beside(rows)
    logging.getLogger("glyphforge").addHandler(handler)
    try:
        reader = rows.reopened()
        loader = DataLoader(reader, shuffle=True, batch_size=64)
        seen = [row for _, targets in loader for row in targets["row"].tolist()]
    finally:
        logging.getLogger("glyphforge").removeHandler(handler)
    assert sorted(seen) == list(range(ROWS)) and reader.materialized == decoded_dir(rows.path)
    assert len(handler.seen) == 1
    message, then = handler.seen[0]
    assert then == []  # nothing of the copy was written yet, not even its staging
    assert f"Writing a decoded copy to read rows from: {human_size(copy_nbytes(rows))} at {decoded_dir(rows.path)}" \
        in message
    assert "within the budget of" in message and "% of the" in message and "free there" in message


@pytest.mark.parametrize("budget", ["10KB", "0"])
def test_beyond_the_budget_in_the_environment_auto_keeps_decoding_says_once_how_to_allow_it_and_explicit_copies_go(
        rows, budget, monkeypatch, caplog):
    monkeypatch.setenv("GLYPHFORGE_DECODED_BUDGET", budget)
    caplog.set_level(logging.INFO, logger="glyphforge")
    reader = rows.reopened()
    shuffled_reads(reader)
    shuffled_reads(reader)
    said = warnings(caplog)
    needed = copy_nbytes(rows)
    assert len(said) == 1 and reader.materialized is None and beside(rows) == []
    assert f"it takes {human_size(needed)} at {decoded_dir(rows.path)}" in said[0]
    assert f"($GLYPHFORGE_DECODED_BUDGET={budget})" in said[0] and "It goes on decoding shard by shard" in said[0]
    allow = f"{-(-needed // 10**6)}MB"
    assert f"call ds.materialize(), or pass decoded_budget='{allow}'" in said[0]
    assert f"or set GLYPHFORGE_DECODED_BUDGET={allow}" in said[0]
    explicit = rows.reopened(random_access="materialize")  # an explicit request: no budget
    assert explicit[5][1]["row"] == 5 and explicit.materialized == decoded_dir(rows.path)
    shutil.rmtree(decoded_dir(rows.path))  # the test's doing: so that the next reader makes it again
    monkeypatch.setenv("GLYPHFORGE_DECODED_BUDGET", allow)  # as the advice says
    allowed = rows.reopened()
    shuffled_reads(allowed)
    assert allowed.materialized == decoded_dir(rows.path)


def test_the_budget_argument_is_passed_like_random_access_and_beats_the_environment(rows, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="glyphforge")
    reader = gf.open_built(rows.path, decoded_budget="10KB")
    for handle in (reader, pickle.loads(pickle.dumps(reader)), reader.reopened(cache_shards=4)):
        assert handle.decoded_budget == "10KB"
        shuffled_reads(handle)
        assert handle.materialized is None
    said = warnings(caplog)
    assert len(said) == 3 and all("(decoded_budget='10KB')" in text for text in said)  # once per reader
    assert beside(rows) == []
    monkeypatch.setenv("GLYPHFORGE_DECODED_BUDGET", "0")
    allowed = rows.reopened(decoded_budget=10**9)
    shuffled_reads(allowed)
    assert allowed.materialized == decoded_dir(rows.path)


def test_the_default_budget_is_a_part_of_the_free_space(rows, monkeypatch, caplog):
    monkeypatch.setattr(copy_source, "BUDGET_FRACTION", 1e-12)  # a disk ~10^12 times fuller, in effect
    caplog.set_level(logging.WARNING, logger="glyphforge")
    reader = rows.reopened()
    shuffled_reads(reader)
    said = warnings(caplog)
    assert len(said) == 1 and "free there). It goes on decoding shard by shard" in said[0]
    assert reader.materialized is None and beside(rows) == []


def test_a_budget_that_is_not_a_size_is_refused_when_the_dataset_is_opened(rows, monkeypatch):
    with pytest.raises(ValueError, match=r"decoded_budget: -1 is not a size: give bytes"):
        rows.reopened(decoded_budget=-1)
    monkeypatch.setenv("GLYPHFORGE_DECODED_BUDGET", "lots")
    with pytest.raises(ValueError, match=r"\$GLYPHFORGE_DECODED_BUDGET: 'lots' is not a size"):
        rows.reopened()
