"""EMNIST: NIST's ``gzip.zip``, declared as a per-class dataset of six splits, its reader and its public names.

All six splits (:data:`SPLITS`: ``byclass``, ``bymerge``, ``balanced``, ``letters``,
``digits``, ``mnist``) are read from the one upstream archive, member by member, without
extracting it (:func:`read_split`). :data:`DATASET` declares it; everything else is
:mod:`glyphforge.datasets.classes.files`, which the public functions call with the declaration:
:func:`prepare_emnist` makes cache entries; :func:`load_emnist` and :class:`EMNIST` read them
(preparing them first when they are missing); :func:`preview_examples` and :func:`glyph_images`
(the registry's preview, the glyphs scenes draw) read them and never prepare anything.

Splits and classes
------------------
A class is one character. In label order: ``byclass`` 0-9, A-Z, a-z (62 classes);
``bymerge`` and ``balanced`` 0-9, A-Z and ``abdefghnqrt`` (47: the lower-case letters
whose capitals look different); ``letters`` A-Z (26; NIST labels them 1-26, every
other split from 0); ``digits`` and ``mnist`` 0-9. Loaders return the classes in this
order (NIST's), so with every class ``y`` is NIST's label (``letters``: minus 1).

The archive
-----------
``gzip.zip`` holds the folder ``gzip/`` with, for each split, five members (:func:`member_name`):

- ``gzip/emnist-<split>-{test,train}-images-idx3-ubyte.gz``: gzipped IDX files of
  uint8 ``(n, 28, 28)`` images, white strokes on black, stored **transposed**
  (``image.T`` is upright);
- ``gzip/emnist-<split>-{test,train}-labels-idx1-ubyte.gz``: gzipped IDX files of one
  uint8 label per image;
- ``gzip/emnist-<split>-mapping.txt``: lines ``label ascii_code [more codes]``; the
  class is the character of the first code (``letters`` lists the upper- and
  lower-case codes, and labels from 1).

Everything is checked before the cache is touched, so a bad archive leaves nothing behind:
the mapping must give the split's classes with consecutive labels, every label must be one of
them, each IDX file must be complete with 28x28 images (at least one), and images and labels
must agree in number (:class:`~glyphforge.pipelines.idx.IDXError`,
:class:`~glyphforge.pipelines.archive.ArchiveError`, :class:`EMNISTFormatError`). Against
hostile archives, every member has a cap fitting what it holds, checked before it is inflated:
a mapping file at most :data:`MAX_MAPPING_BYTES`; an IDX file at most :func:`count_cap` images
or labels (NIST's count of the split's subset, :data:`N_IMAGES`, times :data:`COUNT_MARGIN`
for custom archives read with ``verify=False``), checked in its header before its array is
allocated. Test and train are read in parallel, so a split's reading holds at most its two
subsets at their caps.

Cache entries
-------------
One entry of kind ``"emnist"`` per ``(split, shape)``, in the format of
:mod:`glyphforge.datasets.classes.files`: the params ``{"split", "shape", "source", "layout"}``
(``source``: the pinned hash of :data:`EMNIST_ZIP`) and, for any shape but 28x28,
``"resize": "box"``. ``shape=(28, 28)`` is converted from the archive, any other shape
is the box resize (Pillow's ``BOX``, exactly) of every image of the 28x28 entry. An
entry holds one ``.pklz`` per class: the uint8 array ``(n_images_of_class, H, W)``,
upright, white strokes on black, with that class's *test* images first and then its
*train* images, each in archive order; ``upstream_labels.pklz`` holds the class index of every
test example, then of every train example, in archive order (the params hold
``"layout": 2``). ``entry.meta`` holds ``dataset``, ``split``,
``shape``, ``n_images``, ``n_train``, ``n_test``, ``verified`` and ``classes``: one
record per class in label order, ``{"name", "label", "file", "n_test", "n_train"}``
(``label``: NIST's, from 1 for ``letters``). Class files are named ``digit_0.pklz``,
``upper_A.pklz``, ``lower_a.pklz`` (:func:`class_file_name`): names safe on case-insensitive
filesystems (macOS, Windows), where ``A.pklz`` and ``a.pklz`` would be the same file; the
character itself is kept in the manifest (``meta["classes"][i]["name"]``).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from glyphforge._checks import PathLike, quote
from glyphforge.cache import Entry
from glyphforge.context import DataContext, Mirrors
from glyphforge.datasets.class_names import BLANK, ClassNames
from glyphforge.datasets.classes import load as _class_load
from glyphforge.datasets.classes import prepare as _class_prepare
from glyphforge.datasets.classes.args import SUBSETS, class_names
from glyphforge.datasets.classes.declaration import DECLARATIONS, Config, Declaration, Parsed, Subset, declare
from glyphforge.datasets.classes.files import documented
from glyphforge.datasets.classes.load import ClassFilesDataset, config_option_init
from glyphforge.errors import IntegrityError
from glyphforge.pipelines.archive import open_member, read_member
from glyphforge.pipelines.idx import CountCap, read_images, read_labels
from glyphforge.pipelines.resource import Resource

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = [
    "BLANK", "CLASSES", "COUNT_MARGIN", "DATASET", "DEFAULT_METHOD", "DEFAULT_SPLIT", "EMNIST", "EMNISTFormatError",
    "EMNIST_ZIP", "KIND", "MAX_MAPPING_BYTES", "NATIVE_SHAPE", "N_IMAGES", "SPLITS", "SUBSETS", "class_file_name",
    "count_cap", "emnist_classes", "first_label", "glyph_images", "load_emnist", "member_name", "parse_mapping",
    "prepare_emnist", "preview_examples", "read_split",
]

KIND = "emnist"
#: The resize method of every resized entry (part of its cache key).
DEFAULT_METHOD = "box"


# -- splits and classes -------------------------------------------------------------
DIGITS = "0123456789"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = "abcdefghijklmnopqrstuvwxyz"
#: The class characters of each split, in label order.
CLASSES: dict[str, str] = {
    "byclass": DIGITS + UPPER + LOWER,
    "bymerge": DIGITS + UPPER + "abdefghnqrt",
    "balanced": DIGITS + UPPER + "abdefghnqrt",
    "letters": UPPER,
    "digits": DIGITS,
    "mnist": DIGITS,
}
SPLITS = tuple(CLASSES)
DEFAULT_SPLIT = "byclass"


class EMNISTFormatError(IntegrityError, ValueError):
    """The archive's mapping or labels do not describe the split, or a class file is damaged."""


def first_label(split: str) -> int:
    """Return NIST's label of the first class of ``split``: 1 for ``letters``, else 0."""
    return 1 if split == "letters" else 0


def class_file_name(char: str) -> str:
    """Return the entry file name of class ``char``: ``digit_0``, ``upper_A``, ``lower_a`` + ``.pklz``."""
    for prefix, alphabet in (("digit", DIGITS), ("upper", UPPER), ("lower", LOWER)):
        if len(char) == 1 and char in alphabet:
            return f"{prefix}_{char}.pklz"
    raise ValueError(f"{char!r} is not an EMNIST class: classes are single characters 0-9, A-Z or a-z")


# -- the archive ----------------------------------------------------------------------
#: The upstream archive (size and md5 as pinned by torchvision).
EMNIST_ZIP = Resource(
    dataset=KIND,
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


# -- the declaration and the public names ---------------------------------------------
def _read(dataset: Declaration, split: str, files: Mapping[str, tuple[Path, bool]], progress: bool) -> Parsed:
    """The reader: the split's members of the one archive."""
    return read_split(files[EMNIST_ZIP.filename][0], split, progress)


def _class_file(label: int, char: str) -> str:
    return class_file_name(char)


#: EMNIST, declared (see the module docstring).
DATASET = declare(Declaration(
    name=KIND,
    title="EMNIST",
    resources={EMNIST_ZIP.filename: EMNIST_ZIP},
    configs={split: Config(tuple(CLASSES[split]), N_IMAGES[split], first_label(split)) for split in SPLITS},
    reader=_read,
    config_option="split",
    default_config=DEFAULT_SPLIT,
    class_file=_class_file,
    default_resize=DEFAULT_METHOD,
    native_shape=NATIVE_SHAPE,
))


@documented(_class_prepare.prepare, KIND)
def prepare_emnist(
    *,
    split: str | Iterable[str] | None = None,
    shapes: Iterable[tuple[int, int]] = (),
    archives: Mapping[str, PathLike] | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    mirrors: Mirrors = None,
    verify: bool | None = None,
    progress: bool | None = None,
    offline: bool | None = None,
) -> list[Entry]:
    """Fetch, validate and convert EMNIST splits, and make resized variants."""
    context = DataContext.resolve(context, data_dir=data_dir, mirrors=mirrors, verify=verify, progress=progress,
                                  offline=offline)
    return _class_prepare.prepare(DECLARATIONS[KIND], config=split, shapes=shapes, archives=archives, context=context)


@documented(_class_load.load, KIND)
def load_emnist(
    classes: Iterable[str | int] | str | None = None,
    *,
    split: str | None = None,
    subset: str = "train",
    balance: bool = False,
    include_blank: bool = False,
    shape: tuple[int, int] | None = None,
    n_examples: int | None = None,
    example_range: tuple[float, float] | None = None,
    seed: int | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    download: bool | None = None,
    mirrors: Mirrors = None,
    offline: bool | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Load EMNIST images of some classes, shuffled, reading only those classes' files."""
    context = DataContext.resolve(context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline)
    return _class_load.load(DECLARATIONS[KIND], classes, config=split, subset=subset, balance=balance,
                            include_blank=include_blank, shape=shape, n_examples=n_examples,
                            example_range=example_range, seed=seed, context=context)


@documented(class_names, KIND)
def emnist_classes(split: str | None = None) -> list[str]:
    """Return the class names of an EMNIST split in label order (no download needed)."""
    return class_names(DECLARATIONS[KIND], split)


@documented(_class_load.glyph_images, KIND)
def glyph_images(
    classes: Iterable[str | int] | str | None = None,
    *,
    example_range: tuple[float, float] | None = None,
    shape: tuple[int, int] | None = None,
    split: str | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Return the EMNIST glyph images scenes draw, reading the cache only."""
    context = DataContext.resolve(context, data_dir=data_dir)
    return _class_load.glyph_images(DECLARATIONS[KIND], classes, example_range=example_range, shape=shape, config=split,
                                    context=context)


preview_examples = _class_load.preview


class EMNIST(ClassFilesDataset):
    """One EMNIST split as a map-style dataset, e.g. ``EMNIST(split="digits", subset="test")``.

    ``EMNIST(root=None, split=None, train=None, transform=None, target_transform=None, download=None, *,
    subset=None, shape=None, context=None, ...)`` (``split`` None: ``byclass``), so torchvision's
    ``EMNIST("data", "digits", train=False)`` means the same: the other keywords are
    :class:`~glyphforge.datasets.classes.load.ClassFilesDataset`'s.
    """

    name = KIND
    if TYPE_CHECKING:  # what config_option_init makes, for type checkers (tests/test_typing.py checks it)
        def __init__(
            self,
            root: PathLike | None = None,
            split: str | None = None,
            train: bool | None = None,
            transform: Callable[[np.ndarray], Any] | None = None,
            target_transform: Callable[[Any], Any] | None = None,
            download: bool | None = None,
            *,
            subset: str | None = None,
            shape: tuple[int, int] | None = None,
            context: DataContext | None = None,
            classes: Iterable[str | int] | str | None = None,
            balance: bool = False,
            include_blank: bool = False,
            example_range: tuple[float, float] | None = None,
            data_dir: PathLike | None = None,
            mirrors: Mirrors = None,
            offline: bool | None = None,
        ) -> None: ...
    else:
        __init__ = config_option_init(DATASET.config_option)

    @property
    def split(self) -> str:
        """The split (the declaration's config)."""
        return self.config
