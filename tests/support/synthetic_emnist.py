"""A synthetic EMNIST ``gzip.zip`` in NIST's exact layout, for tests and benchmarks.

The archive holds the folder ``gzip/`` with, for each of the six splits,
``emnist-<split>-{train,test}-{images-idx3,labels-idx1}-ubyte.gz`` (24 IDX files, gzip
level 6 like upstream) and ``emnist-<split>-mapping.txt`` (6 files, ``label ascii_code
[ascii_code ...]`` lines; ``letters`` has the upper and lower case codes like upstream).

Pixels are stroke-like: every class has a template of three thick anti-aliased segments,
each image a jittered, shifted, brightness-scaled and noisy copy of it (white strokes on
black, mostly zero, compressing about like real handwriting). Images are written
**transposed**, as NIST stores them; :class:`SplitData` keeps the upright arrays, so tests
compare against them directly. ``background="noisy"`` fills the background with
sensor-like noise 0-7 instead of zeros (fresh random values per pixel: it compresses
poorly, like scans whose black is not quite black). The first test image of every split is
:data:`ASYMMETRIC_GLYPH` (a "Γ": a bar along the top and one down the left side), so
orientation can be checked against a picture rather than against this generator.

Counts are parameters: the benchmark writes a full-size ``byclass`` (697,932 + 116,323
images) with ``keep_arrays=False`` in a few tens of seconds, in chunks, without holding
the pixels in memory.

Hostile variants: :func:`write_hostile_copy` copies any zip with one member replaced by
streamed bytes (a member inflating to hundreds of MB from a few hundred KB, never held in
memory), :func:`forge_header` makes a member's headers lie about its size or CRC, and
:func:`black_png` writes a PNG of any size in a few KB (a decompression bomb).
"""
from __future__ import annotations

import gzip
import hashlib
import io
import struct
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DIGITS = "0123456789"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = "abcdefghijklmnopqrstuvwxyz"
MERGED_LOWER = "abdefghnqrt"

#: Characters of each split in label order, and the first label (letters count from 1).
CLASSES: dict[str, str] = {
    "byclass": DIGITS + UPPER + LOWER,
    "bymerge": DIGITS + UPPER + MERGED_LOWER,
    "balanced": DIGITS + UPPER + MERGED_LOWER,
    "letters": UPPER,
    "digits": DIGITS,
    "mnist": DIGITS,
}
FIRST_LABEL: dict[str, int] = {"letters": 1}

#: Default (train, test) counts: small, every class present in both subsets, uneven class sizes.
DEFAULT_COUNTS: dict[str, tuple[int, int]] = {
    "byclass": (250, 130),
    "bymerge": (190, 100),
    "balanced": (150, 94),
    "letters": (110, 60),
    "digits": (60, 30),
    "mnist": (45, 25),
}
FULL_BYCLASS = (697_932, 116_323)

#: 28x28 upright "Γ": rows 3-5 bright across columns 5-21, columns 5-7 bright down rows 3-24.
ASYMMETRIC_GLYPH = np.zeros((28, 28), np.uint8)
ASYMMETRIC_GLYPH[3:6, 5:22] = 255
ASYMMETRIC_GLYPH[3:25, 5:8] = 255

_CHUNK = 32_768
_VARIANTS = 48
#: ``background`` choices: zeros, or uniform noise 0-7 on every background pixel.
BACKGROUNDS = ("clean", "noisy")
_NOISE_MAX = 7


@dataclass
class SplitData:
    """What was written for one split (upright images; empty arrays when not kept)."""

    classes: str
    first_label: int
    train_labels: np.ndarray
    test_labels: np.ndarray
    train_images: np.ndarray | None = None
    test_images: np.ndarray | None = None


@dataclass
class SyntheticEMNIST:
    """A written archive: its path, hashes and, per split, what it holds."""

    path: Path
    md5: str
    sha256: str
    size: int
    splits: dict[str, SplitData] = field(default_factory=dict)


def member_names(split: str) -> dict[str, str]:
    """Return the archive member names of ``split``: keys ``train-images``, ..., ``mapping``."""
    names = {
        f"{subset}-{kind}": f"gzip/emnist-{split}-{subset}-{kind}-idx{3 if kind == 'images' else 1}-ubyte.gz"
        for subset in ("train", "test")
        for kind in ("images", "labels")
    }
    names["mapping"] = f"gzip/emnist-{split}-mapping.txt"
    return names


def mapping_text(split: str, extra_columns: bool = False) -> str:
    """Return the text of ``emnist-<split>-mapping.txt`` as NIST writes it."""
    first = FIRST_LABEL.get(split, 0)
    lines = []
    for offset, char in enumerate(CLASSES[split]):
        codes = [ord(char)]
        if split == "letters":
            codes.append(ord(char.lower()))
        if extra_columns:
            codes.append(ord(char.swapcase()) if char.isalpha() else 32)
        lines.append(" ".join(str(value) for value in [first + offset, *codes]))
    return "\n".join(lines) + "\n"


def idx_header(magic: int, *dims: int) -> bytes:
    """Return an IDX header: big-endian magic then each dimension."""
    return struct.pack(f">{1 + len(dims)}I", magic, *dims)


def idx_images(images: np.ndarray) -> bytes:
    """Return the (uncompressed) IDX bytes of upright images, stored transposed like NIST."""
    n, rows, cols = images.shape
    return idx_header(2051, n, rows, cols) + np.ascontiguousarray(images.transpose(0, 2, 1)).tobytes()


def idx_labels(labels: np.ndarray) -> bytes:
    """Return the (uncompressed) IDX bytes of a label vector."""
    return idx_header(2049, len(labels)) + labels.astype(np.uint8).tobytes()


def gzip_bytes(data: bytes, level: int = 6) -> bytes:
    """Return ``data`` as a gzip stream (fixed mtime, so output is reproducible)."""
    return gzip.compress(data, compresslevel=level, mtime=0)


def class_counts(total: int, n_classes: int) -> np.ndarray:
    """Split ``total`` images over classes unevenly (weights 1-4), every class at least one."""
    if total < n_classes:
        raise ValueError(f"{total} images cannot cover {n_classes} classes: give at least {n_classes}")
    weights = 1 + np.arange(n_classes) % 4
    extra = (total - n_classes) * weights / weights.sum()
    counts = 1 + np.floor(extra).astype(np.int64)
    remainder = total - counts.sum()
    counts[np.argsort(extra - np.floor(extra), kind="stable")[::-1][:remainder]] += 1
    return counts


class _GlyphBank:
    """Per-class templates of three anti-aliased segments, and jittered, shifted variants."""

    def __init__(self, n_classes: int, n_variants: int, rng: np.random.Generator) -> None:
        axis = np.arange(28, dtype=np.float32)
        grid = np.stack(np.meshgrid(axis, axis, indexing="ij"), -1)
        templates = rng.uniform(5, 22, size=(n_classes, 1, 3, 2, 2))
        jitter = rng.normal(0, 1.2, size=(n_classes, n_variants, 3, 2, 2))
        shift = rng.integers(-3, 4, size=(n_classes, n_variants, 1, 1, 2))
        segments = np.clip(templates + jitter + shift, 1, 26).astype(np.float32)
        distance = np.full((n_classes, n_variants, 28, 28), np.inf, np.float32)
        for index in range(segments.shape[2]):
            start, direction = segments[:, :, index, 0], segments[:, :, index, 1] - segments[:, :, index, 0]
            length2 = np.maximum((direction ** 2).sum(-1), 1e-6)[:, :, None, None]
            relative = grid[None, None] - start[:, :, None, None]
            t = np.clip((relative * direction[:, :, None, None]).sum(-1) / length2, 0, 1)
            offset = relative - t[..., None] * direction[:, :, None, None]
            np.minimum(distance, np.sqrt((offset ** 2).sum(-1)), out=distance)
        self.n_variants = n_variants
        self.glyphs = (255 * np.clip((3.2 - distance) / 1.7, 0, 1)).astype(np.uint8)
        self.noise = rng.integers(-50, 32, size=(4096, 28, 28), dtype=np.int16)

    def draw(self, labels: np.ndarray, rng: np.random.Generator, background: str = "clean") -> np.ndarray:
        """Return one upright image per class index in ``labels`` (background: see :data:`BACKGROUNDS`)."""
        glyphs = self.glyphs[labels, rng.integers(0, self.n_variants, len(labels))].astype(np.int32)
        gain = rng.integers(170, 257, size=(len(labels), 1, 1), dtype=np.int32)
        noisy = (glyphs * gain >> 8) + self.noise[rng.integers(0, len(self.noise), len(labels))]
        empty: np.ndarray | int = 0
        if background == "noisy":
            empty = rng.integers(0, _NOISE_MAX + 1, size=glyphs.shape, dtype=np.uint8)
        return np.where(glyphs > 0, np.clip(noisy, 1, 255), empty).astype(np.uint8)


def draw_images(
    n: int, n_classes: int = len(CLASSES["byclass"]), *, background: str = "clean", seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``n`` upright images and their class indices (uneven class sizes), as the archive's images are drawn."""
    if background not in BACKGROUNDS:
        raise ValueError(f"background={background!r} is not one of {BACKGROUNDS}")
    rng = np.random.default_rng(seed)
    bank = _GlyphBank(n_classes, _VARIANTS, rng)
    labels = rng.permutation(np.repeat(np.arange(n_classes), class_counts(n, n_classes)))
    return np.concatenate(list(_image_chunks(labels, bank, rng, False, background))), labels


def _image_chunks(
    labels: np.ndarray, bank: _GlyphBank, rng: np.random.Generator, glyph_first: bool, background: str
) -> Iterator[np.ndarray]:
    for start in range(0, len(labels), _CHUNK):
        chunk = bank.draw(labels[start:start + _CHUNK], rng, background)
        if start == 0 and glyph_first:
            chunk[0] = ASYMMETRIC_GLYPH
        yield chunk


def _write_gzip_member(archive: zipfile.ZipFile, name: str, header: bytes, chunks: Iterator[np.ndarray]) -> None:
    info = zipfile.ZipInfo(name, date_time=(2017, 4, 12, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    with archive.open(info, "w", force_zip64=True) as member:
        filename = name.rsplit("/", 1)[-1][:-3]
        with gzip.GzipFile(filename=filename, mode="wb", fileobj=member, compresslevel=6, mtime=0) as gz:
            gz.write(header)
            for chunk in chunks:
                gz.write(np.ascontiguousarray(chunk.transpose(0, 2, 1)) if chunk.ndim == 3 else chunk)


def write_synthetic_emnist(
    path: str | Path,
    counts: Mapping[str, tuple[int, int]] | None = None,
    *,
    seed: int = 0,
    keep_arrays: bool = True,
    extra_mapping_columns: bool = False,
    background: str = "clean",
) -> SyntheticEMNIST:
    """Write a synthetic EMNIST ``gzip.zip`` and return what it holds.

    Parameters
    ----------
    path
        The zip to write (its folder must exist).
    counts
        ``{split: (n_train, n_test)}`` overriding :data:`DEFAULT_COUNTS` for some splits.
    seed
        Seeds every random choice: the same arguments write the same bytes.
    keep_arrays
        Keep the upright images in the result (off for full-size benchmark archives).
    extra_mapping_columns
        Add one more code column to every mapping line (the parser must ignore it).
    background
        ``"clean"`` (zeros) or ``"noisy"`` (uniform noise 0-7): see :data:`BACKGROUNDS`.
    """
    if background not in BACKGROUNDS:
        raise ValueError(f"background={background!r} is not one of {BACKGROUNDS}")
    path = Path(path)
    wanted = {**DEFAULT_COUNTS, **(counts or {})}
    rng = np.random.default_rng(seed)
    result = SyntheticEMNIST(path=path, md5="", sha256="", size=0)
    with zipfile.ZipFile(path, "w", compresslevel=1) as archive:
        archive.writestr(zipfile.ZipInfo("gzip/", date_time=(2017, 4, 12, 0, 0, 0)), b"")
        for split in CLASSES:
            result.splits[split] = _write_split(archive, split, wanted[split], rng, keep_arrays, extra_mapping_columns,
                                                background)
    data = path.read_bytes()
    result.md5, result.sha256, result.size = hashlib.md5(data).hexdigest(), hashlib.sha256(data).hexdigest(), len(data)
    return result


def _write_split(
    archive: zipfile.ZipFile,
    split: str,
    counts: tuple[int, int],
    rng: np.random.Generator,
    keep_arrays: bool,
    extra_mapping_columns: bool,
    background: str,
) -> SplitData:
    n_classes, first = len(CLASSES[split]), FIRST_LABEL.get(split, 0)
    bank = _GlyphBank(n_classes, min(_VARIANTS, 1 + sum(counts) // n_classes), rng)
    names = member_names(split)
    data = SplitData(CLASSES[split], first, np.empty(0, np.uint8), np.empty(0, np.uint8))
    for subset, n in zip(("train", "test"), counts, strict=True):
        indices = rng.permutation(np.repeat(np.arange(n_classes), class_counts(n, n_classes)))
        labels = (indices + first).astype(np.uint8)
        kept: list[np.ndarray] = []

        def chunks(indices: np.ndarray, subset: str, kept: list[np.ndarray]) -> Iterator[np.ndarray]:
            for chunk in _image_chunks(indices, bank, rng, subset == "test", background):
                if keep_arrays:
                    kept.append(chunk)
                yield chunk

        images = chunks(indices, subset, kept)
        _write_gzip_member(archive, names[f"{subset}-images"], idx_header(2051, n, 28, 28), images)
        _write_gzip_member(archive, names[f"{subset}-labels"], idx_header(2049, n), iter([labels]))
        setattr(data, f"{subset}_labels", labels)
        if keep_arrays:
            setattr(data, f"{subset}_images", np.concatenate(kept))
    archive.writestr(names["mapping"], mapping_text(split, extra_mapping_columns))
    return data


def replace_members(source: str | Path, dest: str | Path, replacements: Mapping[str, bytes | None]) -> Path:
    """Copy a zip, replacing the bytes of some members (None: leave the member out).

    Parameters
    ----------
    source, dest
        The zip to copy and the new zip.
    replacements
        ``{member name: new bytes or None}``; every name must exist in ``source``.
    """
    dest = Path(dest)
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as copy:
        missing = set(replacements) - set(original.namelist())
        if missing:
            raise KeyError(f"{source} has no members {sorted(missing)}")
        for info in original.infolist():
            if info.filename in replacements:
                if replacements[info.filename] is not None:
                    copy.writestr(info, replacements[info.filename])
            else:
                copy.writestr(info, original.read(info))
    return dest


def read_member(path: str | Path, name: str) -> bytes:
    """Return the stored bytes of one member (test helper to build corrupt copies)."""
    with zipfile.ZipFile(path) as archive:
        return archive.read(name)


def gunzip(data: bytes) -> bytes:
    """Return the decompressed bytes of a gzip stream."""
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
        return stream.read()


def zero_chunks(n_bytes: int, chunk: int = 1 << 22) -> Iterator[memoryview]:
    """Yield ``n_bytes`` zero bytes in chunks of ``chunk`` (the last one shorter): views of one buffer, never copied."""
    zeros = memoryview(bytes(chunk))
    for start in range(0, n_bytes, chunk):
        yield zeros[:min(chunk, n_bytes - start)]


def write_hostile_copy(
    source: str | Path,
    dest: str | Path,
    name: str,
    chunks: Iterable[bytes | memoryview],
    *,
    gzipped: bool = False,
    compress_type: int = zipfile.ZIP_DEFLATED,
) -> Path:
    """Copy the zip ``source`` to ``dest`` with member ``name`` replaced (or added) by the bytes of ``chunks``.

    Parameters
    ----------
    source, dest
        The zip to copy and the new zip.
    name
        The member to write; the other members are copied as they are, in order.
    chunks
        The member's bytes, streamed (a bomb of hundreds of MB is never held in memory).
    gzipped
        Wrap the bytes in a gzip stream first (isal level 1: 2 GB of zeros take 0.1 s), like
        EMNIST's IDX members.
    compress_type
        The member's zip method (deflate at zlib's default level: zeros shrink about 1000-fold).
    """
    from isal import igzip

    dest = Path(dest)
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(dest, "w") as copy:
        for info in original.infolist():
            if info.filename != name:
                copy.writestr(info, original.read(info), compress_type=info.compress_type, compresslevel=1)
        info = zipfile.ZipInfo(name, date_time=(2017, 4, 12, 0, 0, 0))
        info.compress_type = compress_type
        info.external_attr = 0o644 << 16
        with copy.open(info, "w") as member:
            if gzipped:
                with igzip.GzipFile(fileobj=member, mode="wb", compresslevel=1, mtime=0) as gz:
                    for chunk in chunks:
                        gz.write(chunk)
            else:
                for chunk in chunks:
                    member.write(chunk)
    return dest


def forge_header(path: str | Path, name: str, *, file_size: int | None = None, crc: int | None = None) -> None:
    """Make the local and central headers of member ``name`` declare ``file_size`` and/or ``crc`` (a lying zip).

    The member must have plain (not zip64) headers: written below 2 GiB without ``force_zip64``.
    """
    path = Path(path)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        local, offset = archive.getinfo(name).header_offset, archive.start_dir
    central = None
    while raw[offset:offset + 4] == b"PK\x01\x02" and central is None:
        name_length, extra_length, comment_length = struct.unpack_from("<HHH", raw, offset + 28)
        if raw[offset + 46:offset + 46 + name_length] == name.encode():
            central = offset
        offset += 46 + name_length + extra_length + comment_length
    if central is None:
        raise KeyError(f"{path}: no central directory entry for {name!r}")
    for header, crc_at, size_at in ((local, 14, 22), (central, 16, 24)):
        if file_size is not None:
            struct.pack_into("<I", raw, header + size_at, file_size)
        if crc is not None:
            struct.pack_into("<I", raw, header + crc_at, crc)
    path.write_bytes(bytes(raw))


def black_png(width: int, height: int) -> bytes:
    """Return a 1-bit black PNG of ``width`` x ``height``, written without holding its pixels.

    A 20000x20000 one (400 Mpx, 50 MB of rows) takes about 50 KB: a decompression bomb.
    """
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = 1 + (width + 7) // 8  # the filter byte, then the packed bits
    compressor, parts = zlib.compressobj(9), []
    block = bytes(row * max(1, (1 << 22) // row))
    for start in range(0, row * height, len(block)):
        parts.append(compressor.compress(block[:min(len(block), row * height - start)]))
    parts.append(compressor.flush())
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"".join(parts)) + chunk(b"IEND", b"")
