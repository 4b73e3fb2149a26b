"""The viewer's tests' data dirs: built font scenes and videos (with masks), a prepared synthetic MNIST and EMNIST;
Omniglot's small1 and a few backgrounds, from the real files."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import glyphforge
from glyphforge import cli
from glyphforge.datasets.omniglot.dataset import prepare_omniglot
from glyphforge.scenes.spec import ScatteredGlyphs

from support.synthetic_emnist import write_synthetic_emnist
from support.synthetic_mnist import ALL_FILES, SyntheticMNIST, write_synthetic_mnist

#: Backgrounds carried in ../shared/data, small ones.
BACKGROUNDS = ["blue_circle", "red_x", "water"]
#: Synthetic MNIST's (train, test) images.
MNIST_COUNTS = (300, 60)


@dataclass
class ViewerData:
    """The data dir and what it holds: the built scenes and videos, and the prepared MNIST's files."""

    data_dir: Path
    scenes: glyphforge.BuiltDataset
    videos: glyphforge.BuiltDataset
    mnist: SyntheticMNIST


@pytest.fixture(scope="package")
def viewer_data(tmp_path_factory) -> ViewerData:
    data_dir = tmp_path_factory.mktemp("viewer-data")
    scenes = glyphforge.build(ScatteredGlyphs(200, glyphs="font", masks=True, max_glyphs=4), data_dir=data_dir,
                              progress=False)
    videos = glyphforge.build(ScatteredGlyphs(24, glyphs="font", masks=True, max_glyphs=3, image_shape=(48, 48),
                                              n_frames=6, patch_speed=3.0), data_dir=data_dir, progress=False)
    mnist = write_synthetic_mnist(tmp_path_factory.mktemp("mnist-files"), MNIST_COUNTS, seed=3)
    raw = data_dir / "raw" / "mnist"
    raw.mkdir(parents=True)
    for name in ALL_FILES:  # placed by hand, prepared unverified: no network
        shutil.copy(mnist.path(name), raw / name)
    assert cli.prepare_data_main(["mnist", "--offline", "--no-verify", "-q", "--data-dir", str(data_dir)]) == 0
    (data_dir / "raw" / "emnist").mkdir()  # EMNIST's digits: a dataset with a config (its split)
    write_synthetic_emnist(data_dir / "raw" / "emnist" / "gzip.zip", keep_arrays=False)
    assert cli.prepare_data_main(["emnist", "--split", "digits", "--offline", "--no-verify", "-q", "--data-dir",
                                  str(data_dir)]) == 0
    return ViewerData(data_dir, scenes, videos, mnist)


@pytest.fixture(scope="package")
def more_data(shared_data, tmp_path_factory) -> Path:
    """A data dir with Omniglot's small1 and the `BACKGROUNDS`, from the real files (skip without them)."""
    data_dir = tmp_path_factory.mktemp("viewer-more")
    prepare_omniglot(sets="small1", data_dir=data_dir, mirrors=[shared_data.as_uri()], progress=False)
    glyphforge.prepare_backgrounds(names=BACKGROUNDS, data_dir=data_dir, mirrors=[shared_data.as_uri()],
                                   progress=False)
    return data_dir
