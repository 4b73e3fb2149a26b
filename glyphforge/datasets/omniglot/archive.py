"""Converting one Omniglot image-set zip into a cache writer: layout checks and parallel PNG decoding.

A set's zip holds ``<folder>/<alphabet>/characterNN/<id>_<drawer>.png`` (105x105, black
strokes on white, drawers 01-20). :func:`convert_set` writes one ``<alphabet>.pklz``
per alphabet, uint8 ``(n_characters, 20, 105, 105)`` white on black, reading the zip
member by member without extracting it.

Each PNG member may declare at most :data:`MAX_PNG_BYTES` (checked before inflating
it) and its header at most :data:`MAX_PNG_PIXELS` (checked before decoding it), so a
zip or decompression bomb is refused naming the archive and the member.
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from glyphforge import _checks
from glyphforge.cache import Writer
from glyphforge.errors import IntegrityError
from glyphforge.pipelines.archive import iter_members, list_members
from glyphforge.pipelines.decode import decode_image

NATIVE_SHAPE = (105, 105)
#: Cap on one PNG member's bytes: Omniglot's 1-bit 105x105 drawings take under 1 KB.
MAX_PNG_BYTES = 1 << 20
#: Cap on one PNG's pixels, read from its header before decoding (Omniglot's have 11,025).
MAX_PNG_PIXELS = 4096 * 4096
#: Drawings per character, one by each of 20 drawers (the one definition of this number).
N_DRAWERS = 20
#: Sets with at least this many images are decoded in worker processes by default.
PARALLEL_MIN_IMAGES = 10_000


class OmniglotFormatError(IntegrityError, ValueError):
    """A zip does not have Omniglot's layout; the message names the archive and the member."""


@dataclasses.dataclass(frozen=True)
class Alphabet:
    """One alphabet of a zip: ``members[c][d]`` is the PNG of character ``c``, drawer ``d``.

    ``characters`` are the folder names (``"character01"``, ...) and ``ids`` the upstream
    character ids of the file names (``"0683"``), in character order.
    """

    name: str
    characters: list[str]
    ids: list[str]
    members: list[list[str]]

    @property
    def file(self) -> str:
        """The entry file of the alphabet."""
        return f"{self.name}.pklz"

    def record(self) -> dict[str, object]:
        """The alphabet's record in the entry's ``meta["alphabets"]``."""
        return {"name": self.name, "file": self.file, "characters": self.characters, "ids": self.ids}


def read_layout(zip_path: Path, folder: str) -> list[Alphabet]:
    """Group the PNG members under ``folder/`` by alphabet and character, in name and number order.

    Raises
    ------
    OmniglotFormatError
        When a PNG is not where Omniglot puts them, a character misses drawers or
        mixes ids, the characters are not numbered 1 to n, or there are no images.
    """
    pattern = re.compile(rf"^{re.escape(folder)}/([^/.][^/]*)/character(\d+)/(\d+)_(\d+)\.png$")
    found: dict[str, dict[int, dict[int, tuple[str, str]]]] = {}
    for member in list_members(zip_path):
        if not member.startswith(f"{folder}/"):
            continue
        match = pattern.match(member)
        if match is None:
            if member.endswith(".png"):
                raise OmniglotFormatError(
                    f"{zip_path}: member {_checks.quote(member)} is not "
                    f"'{folder}/<alphabet>/characterNN/<id>_<drawer>.png'; "
                    "the archive is not an Omniglot image set"
                )
            continue
        alphabet, number, character_id, drawer = match.groups()
        found.setdefault(alphabet, {}).setdefault(int(number), {})[int(drawer)] = (character_id, member)
    if not found:
        raise OmniglotFormatError(
            f"{zip_path} holds no images under {folder}/: it is not the Omniglot zip it should be "
            "(delete it and download it again)"
        )
    return [_alphabet(zip_path, name, found[name]) for name in sorted(found)]


def _alphabet(zip_path: Path, name: str, characters: dict[int, dict[int, tuple[str, str]]]) -> Alphabet:
    numbers = sorted(characters)
    if numbers != list(range(1, len(numbers) + 1)):
        raise OmniglotFormatError(
            f"{zip_path}: alphabet {name} has characters {numbers}, expected character01 to character{len(numbers):02d}"
        )
    ids, members = [], []
    for number in numbers:
        drawers = characters[number]
        character_ids = {character_id for character_id, _ in drawers.values()}
        if sorted(drawers) != list(range(1, N_DRAWERS + 1)) or len(character_ids) != 1:
            raise OmniglotFormatError(
                f"{zip_path}: {name}/character{number:02d} has drawers {sorted(drawers)} and ids "
                f"{sorted(character_ids)}; expected drawers 1-{N_DRAWERS} of one character id"
            )
        ids.append(character_ids.pop())
        members.append([drawers[drawer][1] for drawer in range(1, N_DRAWERS + 1)])
    return Alphabet(name, [f"character{number:02d}" for number in numbers], ids, members)


def convert_alphabet(writer: Writer, zip_path: Path, alphabet: Alphabet) -> int:
    """Decode one alphabet's PNGs to white on black, write its array, and return the image count.

    Runs in worker processes for the large sets: it takes and returns picklable values only.
    """
    flat = [member for character in alphabet.members for member in character]
    images = np.empty((len(flat), *NATIVE_SHAPE), np.uint8)
    for index, (member, data) in enumerate(iter_members(zip_path, flat, max_bytes=MAX_PNG_BYTES)):
        image = decode_image(data, channels=1, name=f"{member} in {zip_path}", max_pixels=MAX_PNG_PIXELS)
        if image.shape != NATIVE_SHAPE:
            raise OmniglotFormatError(
                f"{zip_path}: {member} is {image.shape[1]}x{image.shape[0]} pixels, Omniglot images are "
                f"{NATIVE_SHAPE[1]}x{NATIVE_SHAPE[0]}; the archive is not Omniglot's"
            )
        np.subtract(255, image, out=images[index])  # black strokes on white -> white on black
    writer.write(alphabet.file, images.reshape(len(alphabet.members), N_DRAWERS, *NATIVE_SHAPE))
    return len(flat)


def worker_count(workers: int | None, n_images: int, n_alphabets: int) -> int:
    """Processes to use: ``workers``, else 1 (inline) below :data:`PARALLEL_MIN_IMAGES` images, else one per CPU.

    Never more than one per alphabet (an alphabet is one task).
    """
    if workers is None and n_images < PARALLEL_MIN_IMAGES:
        return 1
    return max(1, min(_checks.worker_count(workers), n_alphabets))


def convert_set(
    writer: Writer, zip_path: Path, folder: str, *, workers: int | None, label: str, progress: bool
) -> list[Alphabet]:
    """Write every alphabet of the zip into ``writer``, one task per alphabet; return the alphabets.

    Parameters
    ----------
    writer
        The cache writer of the set's 105x105 entry.
    zip_path, folder
        The zip and its top folder (``"images_background"``).
    workers
        Processes (see :func:`worker_count`); with 1 the PNGs are decoded in this process.
    label, progress
        The progress bar's title, and whether to show it.
    """
    alphabets = read_layout(zip_path, folder)
    n_images = sum(len(alphabet.members) for alphabet in alphabets) * N_DRAWERS
    n_workers = worker_count(workers, n_images, len(alphabets))
    from tqdm import tqdm  # where a bar is made: importing it costs a cold start ~20 ms
    with tqdm(total=n_images, desc=label, unit="img", disable=not progress) as bar:
        if n_workers == 1:
            for alphabet in alphabets:
                bar.update(convert_alphabet(writer, zip_path, alphabet))
            return alphabets
        context = multiprocessing.get_context("spawn")  # never fork a process that runs numba or Dask threads
        with ProcessPoolExecutor(n_workers, mp_context=context) as pool:
            jobs = [pool.submit(convert_alphabet, writer, zip_path, alphabet) for alphabet in alphabets]
            try:
                for job in jobs:
                    bar.update(job.result())
            except BaseException:
                pool.shutdown(cancel_futures=True)
                raise
    return alphabets
