"""Built datasets of any kind in a stock torch DataLoader: default collate, two workers, shuffled (issue 34).

``ds[i]`` is ``(image, targets dict)``, the dict empty when the build has no other array; a string array
holds one string per example (collated as a list); arrays the default collate cannot batch are refused
at build time (tests/builds/making/test_builder.py).
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass

import numpy as np
import pytest

import glyphforge

from support.cli import run
from support.collate import NEEDS_TORCH, loaded_examples
from support.own_copy import OWN, place, prepare_cli
from support.specs import RowSpec
from support.synthetic_mnist import write_synthetic_mnist


@dataclass
class ImagesOnly(RowSpec):
    """`RowSpec`'s images, no other array."""

    kind: str = "test-images-only"

    def make_shard(self, index, rng, n):
        return {"images": super().make_shard(index, rng, n)["images"]}


@NEEDS_TORCH
@pytest.mark.parametrize("spec", [RowSpec(n_examples=150, shard_size=40), ImagesOnly(n_examples=150, shard_size=40)],
                         ids=["rows-and-names", "images-only"])
def test_a_built_dataset_batches_in_a_stock_dataloader(tmp_path, spec):
    dataset = glyphforge.build(spec, data_dir=tmp_path, progress=False)
    images, targets = loaded_examples(dataset, batch_size=16)  # every batch checked against dataset[i]
    assert images.numpy().dtype == np.uint8 and images.shape == (16, 3, 4)
    if isinstance(spec, ImagesOnly):
        assert targets == {} and dataset[3][1] == {}
        return
    rows = targets["row"].numpy()
    assert rows.dtype == np.int64 and rows.shape == (16,)
    assert targets["name"] == [f"r{row}" for row in rows]  # one string per example: a list of them


# -- "your own copy (unverified)": said once per run, by the main process, not by each worker (issue 42) -----------
LOADERS = {f"{what} {start}": (what, start) for what in ("dataset", "stream") for start in ("fork", "spawn")}


@pytest.fixture(scope="module")
def own_scenes(tmp_path_factory):
    """The data dir of a scenes entry built from an own copy of MNIST (synthetic files prepared unchecked)."""
    data_dir = tmp_path_factory.mktemp("own-scenes")
    place(write_synthetic_mnist(tmp_path_factory.mktemp("own-files"), (600, 100), seed=21), data_dir, "mnist")
    prepare_cli("mnist", data_dir)
    built = run("glyphforge", "build", "scenes", "--glyphs", "mnist", "--characters", "01", "--image-shape", "24x24",
                "--glyph-shape", "10x10", "--max-glyphs", "2", "--n-examples", "40", "--shard-size", "10", "-q",
                "--data-dir", data_dir, "--offline")
    assert built.returncode == 0, built.stderr
    return data_dir


@pytest.fixture(scope="module")
def said_per_loader(own_scenes):
    """What each of `LOADERS` (after the main process opened the entry) logged with "your own copy (unverified)"."""
    code = textwrap.dedent(f"""
        import sys
        import torch.utils.data
        import glyphforge as gf

        [entry] = [entry for entry in gf.CacheStore.for_data_dir({str(own_scenes)!r}).ls() if entry.kind == "scenes"]
        dataset = gf.open_built(entry.path)
        for name, (what, start) in {LOADERS!r}.items():
            print("--", name, file=sys.stderr, flush=True)
            source = dataset if what == "dataset" else dataset.stream(8)
            loader = torch.utils.data.DataLoader(source, batch_size=8 if what == "dataset" else None, num_workers=2,
                                                 multiprocessing_context=start)
            assert sum(len(images) for images, _ in loader) == 40
        print("-- end", file=sys.stderr, flush=True)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    opened, *loaders = result.stderr.split("\n-- ")
    said = {name.partition("\n")[0]: name.count(OWN) for name in loaders}
    return opened.count(OWN), said


@NEEDS_TORCH
@pytest.mark.slow  # an own copy prepared and built by the CLI, then four loaders of two workers
@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_an_own_copy_is_said_once_per_run_not_by_each_dataloader_worker(said_per_loader, loader):
    opened, said = said_per_loader
    assert opened == 1  # the main process, when it opened the entry
    assert said[loader] == 0
