"""Fixtures the dataset tests share."""
from __future__ import annotations

from pathlib import Path

import pytest

from glyphforge.datasets.omniglot.dataset import prepare_omniglot

#: The Omniglot sets carried in ../shared/data.
SMALL = ("small1", "small2")


@pytest.fixture(scope="module")
def prepared(shared_data, tmp_path_factory) -> Path:
    """A data dir with Omniglot's small1 and small2 converted from the file:// mirror (one a test module)."""
    data_dir = tmp_path_factory.mktemp("omniglot")
    prepare_omniglot(sets=SMALL, data_dir=data_dir, mirrors=[shared_data.as_uri()], progress=False)
    return data_dir
