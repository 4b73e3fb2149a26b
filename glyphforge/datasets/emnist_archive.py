"""NIST's EMNIST ``gzip.zip``: its layout and its validation (EMNIST's reader).

The archive
-----------
``gzip.zip`` holds the folder ``gzip/`` with, for each split (see
:mod:`glyphforge.datasets.emnist_catalog`), five members (:func:`member_name`):

- ``gzip/emnist-<split>-{test,train}-images-idx3-ubyte.gz``: gzipped IDX files of
  uint8 ``(n, 28, 28)`` images, white strokes on black, stored **transposed**
  (``image.T`` is upright);
- ``gzip/emnist-<split>-{test,train}-labels-idx1-ubyte.gz``: gzipped IDX files of one
  uint8 label per image;
- ``gzip/emnist-<split>-mapping.txt``: lines ``label ascii_code [more codes]``; the
  class is the character of the first code (``letters`` lists the upper- and
  lower-case codes, and labels from 1).

Members are read one by one, without extracting the archive. Everything is checked
before the cache is touched, so a bad archive leaves nothing behind: the mapping must
give the split's classes with consecutive labels, every label must be one of them,
each IDX file must be complete with 28x28 images (at least one), and images and labels
must agree in number (:class:`~glyphforge.pipelines.idx.IDXError`,
:class:`~glyphforge.pipelines.archive.ArchiveError`, :class:`EMNISTFormatError`).

Hostile archives
----------------
Every member has a cap fitting what it holds, checked before it is inflated: a mapping
file at most :data:`MAX_MAPPING_BYTES`; an IDX file at most :func:`count_cap` images
or labels (NIST's count of the split's subset, :data:`N_IMAGES`, times
:data:`COUNT_MARGIN` for custom archives read with ``verify=False``), checked in its
header before its array is allocated. Test and train are read in parallel, so a
split's reading holds at most its two subsets at their caps.

What is read
------------
:func:`read_split` returns a split's test and train images as the archive stores them
(transposed) with their class indices from 0; :mod:`glyphforge.datasets.classes.files`
writes the entries from them (upright class files, test images first).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from glyphforge._checks import quote
from glyphforge.datasets.classes.declaration import Parsed, Subset
from glyphforge.datasets.emnist_catalog import CLASSES, EMNISTFormatError, first_label
from glyphforge.pipelines.archive import open_member, read_member
from glyphforge.pipelines.idx import CountCap, read_images, read_labels
from glyphforge.pipelines.resource import Resource

if TYPE_CHECKING:
    from tqdm import tqdm

#: The upstream archive (size and md5 as pinned by torchvision).
EMNIST_ZIP = Resource(
    dataset="emnist",
    filename="gzip.zip",
    url="https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip",
    hash="md5:58c8d27c78d21e728a6bc7b3cc06412e",
    size=561_753_746,
)
NATIVE_SHAPE = (28, 28)
#: The images of each split in NIST's archive: ``(train, test)`` (as published with EMNIST, Cohen et al. 2017).
N_IMAGES: dict[str, tuple[int, int]] = {
    "byclass": (697_932, 116_323),
    "bymerge": (697_932, 116_323),
    "balanced": (112_800, 18_800),
    "letters": (124_800, 20_800),
    "digits": (240_000, 40_000),
    "mnist": (60_000, 10_000),
}
#: A custom archive (``verify=False``) may hold up to this many times NIST's images of a split's subset.
COUNT_MARGIN = 1.25
#: Cap on a mapping file's bytes: NIST's hold at most 62 short lines (under 1 KB).
MAX_MAPPING_BYTES = 64 << 10


def member_name(split: str, part: str) -> str:
    """Return the archive member of ``split``: ``part`` is e.g. ``"train-images"`` or ``"mapping"``."""
    if part == "mapping":
        return f"gzip/emnist-{split}-mapping.txt"
    subset, kind = part.split("-")
    return f"gzip/emnist-{split}-{subset}-{kind}-idx{3 if kind == 'images' else 1}-ubyte.gz"


def count_cap(split: str, subset: str) -> CountCap:
    """Return the most images (and labels) the ``subset`` (``"train"`` or ``"test"``) IDX files of ``split`` may hold.

    That is NIST's count times :data:`COUNT_MARGIN`, rounded down; the reason names both.
    """
    nist = N_IMAGES[split][0 if subset == "train" else 1]
    return CountCap(
        int(nist * COUNT_MARGIN),
        f"NIST's EMNIST {split} has {nist:,} {subset} images, and a custom archive (verify=False, --no-verify) may "
        f"hold at most {COUNT_MARGIN:g}x that. The header is corrupt or this is not an EMNIST archive: use NIST's "
        f"gzip.zip (prepare-data emnist without --emnist-archive downloads it)",
    )


def _gzip_member_cap(idx_bytes: int) -> int:
    """The most bytes a gzip stream of ``idx_bytes`` bytes may take (stored blocks, headers, a long file name)."""
    return idx_bytes + idx_bytes // 1000 + 4096


def parse_mapping(text: str, name: str) -> dict[int, str]:
    """Parse a mapping file's ``label ascii_code [more codes]`` lines into ``{label: char}``.

    The class is the character of the first code; further columns are ignored, blank
    lines skipped. ``name`` is quoted in errors.

    Raises
    ------
    EMNISTFormatError
        For a line that is not at least two integers, or a repeated label.
    """
    mapping: dict[int, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        try:
            label, code = int(fields[0]), int(fields[1])
            char = chr(code)
        except (ValueError, IndexError, OverflowError):
            raise EMNISTFormatError(
                f"{name} line {number} is {quote(line)}: expected 'label ascii_code [more codes]' "
                "(integers separated by spaces); the file is corrupt"
            ) from None
        if label in mapping:
            raise EMNISTFormatError(f"{name} line {number} repeats label {label}; the file is corrupt")
        mapping[label] = char
    return mapping


# -- reading ---------------------------------------------------------------------------
def read_split(zip_path: Path, split: str, progress: bool) -> Parsed:
    """Read and validate the mapping and the four IDX members of ``split`` (test and train in parallel).

    The images are returned as the archive stores them, transposed.

    Raises
    ------
    IDXError, ArchiveError, EMNISTFormatError
        When a member is missing, truncated or corrupt, or the members disagree.
    """
    classes = _read_mapping(zip_path, split)
    from tqdm import tqdm  # where a bar is made: importing it costs a cold start ~20 ms
    with tqdm(total=4, desc=f"EMNIST {split}: reading {zip_path.name}", unit="file", disable=not progress) as bar, \
            ThreadPoolExecutor(2) as pool:
        test, train = pool.map(lambda part: _read_subset(zip_path, split, part, len(classes), bar), ("test", "train"))
    return Parsed(test, train, transposed=True)


def _read_subset(zip_path: Path, split: str, subset: str, n_classes: int, bar: tqdm) -> Subset:
    """Read one subset's labels and images, checking they agree with each other and the mapping."""
    first, cap = first_label(split), count_cap(split, subset)
    images_name, labels_name = member_name(split, f"{subset}-images"), member_name(split, f"{subset}-labels")
    with open_member(zip_path, labels_name, max_bytes=_gzip_member_cap(8 + cap.limit)) as stream:
        labels = read_labels(stream, f"{labels_name} in {zip_path}", cap=cap)
    bar.update()
    outside = np.unique(labels[(labels < first) | (labels >= first + n_classes)])
    if outside.size:
        raise EMNISTFormatError(
            f"{zip_path}: {labels_name} holds labels {outside.tolist()} that {member_name(split, 'mapping')} "
            f"does not define (labels {first}-{first + n_classes - 1}); the archive is corrupt"
        )
    image_bytes = NATIVE_SHAPE[0] * NATIVE_SHAPE[1]
    with open_member(zip_path, images_name, max_bytes=_gzip_member_cap(16 + cap.limit * image_bytes)) as stream:
        images = read_images(stream, f"{images_name} in {zip_path}", dims=NATIVE_SHAPE, cap=cap)
    bar.update()
    if len(images) != len(labels):
        raise EMNISTFormatError(
            f"{zip_path}: {images_name} holds {len(images):,} images but {labels_name} holds "
            f"{len(labels):,} labels; the archive is corrupt"
        )
    if not len(images):
        raise EMNISTFormatError(
            f"{zip_path}: {images_name} holds no images (its header declares 0), but every EMNIST split has {subset} "
            f"images (NIST's {split} has {N_IMAGES[split][subset == 'test']:,}). The archive is truncated or was "
            "written wrongly: use NIST's gzip.zip, or a custom copy whose test and train parts both hold images"
        )
    return Subset(images, labels.astype(np.intp) - first)


def _read_mapping(zip_path: Path, split: str) -> str:
    """Return the split's classes in label order from its mapping file, checked against EMNIST's."""
    name = member_name(split, "mapping")
    data = read_member(zip_path, name, max_bytes=MAX_MAPPING_BYTES)
    mapping = parse_mapping(data.decode("ascii", errors="replace"), f"{name} in {zip_path}")
    first, expected = first_label(split), CLASSES[split]
    found = "".join(mapping[label] for label in sorted(mapping))
    if sorted(mapping) != list(range(first, first + len(expected))) or found != expected:
        raise EMNISTFormatError(
            f"{name} in {zip_path} maps labels {min(mapping, default=None)}-{max(mapping, default=None)} to "
            f"{quote(found)}, but EMNIST {split} has labels {first}-{first + len(expected) - 1} for {expected!r}; "
            "the archive is corrupt or not EMNIST"
        )
    return found
