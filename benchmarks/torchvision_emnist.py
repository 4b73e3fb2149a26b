"""torchvision's own EMNIST steps, timed in a venv that has torchvision (bench_emnist.py runs this).

    TORCHVISION_PYTHON prep  GZIP_ZIP ROOT   # what EMNIST.download does once gzip.zip is there
    TORCHVISION_PYTHON load  ROOT            # EMNIST(ROOT, "byclass", train=True) + train=False

``prep`` runs the steps of ``torchvision.datasets.EMNIST.download`` after its download, with
torchvision's own functions: extract the zip into ``ROOT/EMNIST/raw``, gunzip every member
of its ``gzip/`` folder there (``extract_archive``), remove that folder. ``load`` builds both
byclass datasets from the raw IDX files (torchvision's ``read_image_file`` / ``read_label_file``)
and touches their ``data`` and ``targets``. Each prints one JSON line: seconds, peak RSS (MB),
and for ``load`` the images read. torch 2.14.1 and torchvision 0.29.1 live in a venv of their
own (benchmarks/README.md), never beside the test extra's torch.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import time


def prep(archive: str, root: str) -> dict[str, float]:
    """torchvision's steps from a downloaded ``gzip.zip`` to the raw IDX files under ``root``."""
    from torchvision.datasets import EMNIST
    from torchvision.datasets.utils import extract_archive

    raw = os.path.join(root, EMNIST.__name__, "raw")
    started = time.perf_counter()
    os.makedirs(raw, exist_ok=True)
    extract_archive(archive, raw)
    gzip_folder = os.path.join(raw, "gzip")
    for name in os.listdir(gzip_folder):
        if name.endswith(".gz"):
            extract_archive(os.path.join(gzip_folder, name), raw)
    shutil.rmtree(gzip_folder)
    return {"seconds": time.perf_counter() - started}


def load(root: str) -> dict[str, float]:
    """Both byclass splits read by ``EMNIST(root, "byclass", train=...)`` (everything: torchvision cannot filter)."""
    from torchvision.datasets import EMNIST

    started = time.perf_counter()
    images = 0
    for train in (True, False):
        dataset = EMNIST(root, split="byclass", train=train, download=False)
        images += len(dataset.data)  # its __init__ read the images and the labels
    return {"seconds": time.perf_counter() - started, "images": images}


def main(argv: list[str]) -> None:
    step, *args = argv
    figures = prep(*args) if step == "prep" else load(*args)
    figures["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(figures))


if __name__ == "__main__":
    main(sys.argv[1:])
