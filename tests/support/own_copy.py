"""What the own-copy tests share: the marker text, placing own files as a user would, the CLI prepare."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

from glyphforge import config

from support.cli import run
from support.synthetic_mnist import ALL_FILES, SyntheticMNIST

OWN = "your own copy (unverified)"


def place(files: SyntheticMNIST, data_dir: Path, dataset: str) -> None:
    """Put the four files in ``<data dir>/raw/<dataset>/`` as a user would (replacing what is there)."""
    raw = config.raw_dir(dataset, data_dir)
    raw.mkdir(parents=True, exist_ok=True)
    for name in ALL_FILES:
        (raw / name).unlink(missing_ok=True)
        shutil.copyfile(files.path(name), raw / name)


def own_warnings(caplog) -> list[str]:
    """The WARNINGs logged that say "your own copy (unverified)"."""
    return [record.getMessage() for record in caplog.records
            if record.levelno == logging.WARNING and OWN in record.getMessage()]


def prepare_cli(dataset: str, data_dir: Path):
    """``prepare-data DATASET --no-verify --offline`` as a real process; it must succeed."""
    done = run("prepare-data", dataset, "--no-verify", "--offline", "--data-dir", data_dir, "--no-warmup", "-q")
    assert done.returncode == 0, done.stderr
    return done
