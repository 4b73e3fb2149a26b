"""Which deflate writes the per-class ``.pklz`` files: speed and determinism of each candidate.

    python benchmarks/bench_pklz_codecs.py [--images 100000] [--background noisy] [--repeats 1000]

EMNIST-like images (tests/support/synthetic_emnist.py; ``--background noisy``: sensor-like
noise 0-7 on every background pixel, which compresses poorly) are grouped by class and
each class pickled as a prepare writes it (``dill``, protocol 5). Every candidate writes a
gzip member of each class pickle:

* ``stream``: a ``GzipFile`` that ``dill.dump`` writes into, as pickle framing cuts it
  (zlib: how glyphforge wrote until now; isal: how it wrote before that);
* ``one-shot``: the whole pickle compressed by one call (raw deflate), between a fixed
  10-byte gzip header and the CRC32/size trailer.

Speed: every class written on one thread, then on two (the compressors release the GIL),
in MB of pickle per second, and the size of what each writes. Determinism: ``--repeats``
writes of the same pickle in this process, each after writing other data of other sizes
with the same compressor and filling freed memory with garbage (what a worker that has
just made something else looks like), on two threads at once; then the same in two other
processes at once; every write's bytes are compared with this process's first. Nothing
here is a test: it is the study behind the choice in ``glyphforge.cache.pklz``.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dill
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\xff"  # gzip, deflate, no name, mtime 0, "fastest", OS unknown


def _member(deflate: Callable[[bytes], bytes]) -> Callable[[np.ndarray], bytes]:
    def write(images: np.ndarray) -> bytes:
        payload = dill.dumps(images, protocol=5)
        trailer = struct.pack("<II", zlib.crc32(payload), len(payload) & 0xFFFFFFFF)
        return _HEADER + deflate(payload) + trailer
    return write


def _stream(module: object) -> Callable[[np.ndarray], bytes]:
    def write(images: np.ndarray) -> bytes:
        out = io.BytesIO()
        with module.GzipFile(filename="", mode="wb", compresslevel=1, fileobj=out, mtime=0) as stream:  # type: ignore[attr-defined]
            dill.dump(images, stream, protocol=5)
        return out.getvalue()
    return write


def candidates() -> dict[str, Callable[[np.ndarray], bytes]]:
    """Each candidate's name and its writer (images -> gzip member bytes)."""
    from isal import igzip, isal_zlib

    found = {
        "zlib-1 stream (until now)": _stream(gzip),
        "isal-1 stream (before)": _stream(igzip),
        "zlib-1 one-shot": _member(lambda data: zlib.compress(data, 1, wbits=-15)),
    }
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        print("zlib-ng is not installed (pip install zlib-ng): its rows are left out")
    else:
        for level in (1, 2):
            found[f"zlib-ng-{level} one-shot"] = _member(lambda data, level=level: zlib_ng.compress(data, level,
                                                                                                   wbits=-15))
    for level in (0, 1, 2):
        found[f"isal-{level} one-shot"] = _member(lambda data, level=level: isal_zlib.compress(data, level, wbits=-15))
    return found


def classes(n_images: int, background: str) -> list[np.ndarray]:
    from support.synthetic_emnist import draw_images

    images, labels = draw_images(n_images, background=background)
    order = np.argsort(labels, kind="stable")
    return np.split(images[order], np.cumsum(np.bincount(labels))[:-1])


def speed(write: Callable[[np.ndarray], bytes], blocks: list[np.ndarray], threads: int) -> tuple[float, int]:
    """MB of images per second writing every block, and the bytes written."""
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        sizes = list(pool.map(lambda block: len(write(block)), blocks))
    return sum(block.nbytes for block in blocks) / 1e6 / (time.perf_counter() - started), sum(sizes)


def repeat_writes(write: Callable[[np.ndarray], bytes], blocks: list[np.ndarray], repeats: int, seed: int
                  ) -> tuple[str, int]:
    """Write ``blocks[0]`` ``repeats`` times on two threads, other data and garbage between.

    Returns the first write's sha256 and how many writes differ from it.
    """
    digests: list[str] = []

    def one(index: int) -> str:
        rng = np.random.default_rng([seed, index])
        other = blocks[1 + index % (len(blocks) - 1)]
        write(other[: int(rng.integers(1, len(other) + 1))])
        garbage = np.full(int(rng.integers(1 << 16, 1 << 22)), index % 251, np.uint8).tobytes()  # freed: reused
        del garbage
        return hashlib.sha256(write(blocks[0])).hexdigest()

    with ThreadPoolExecutor(2) as pool:
        digests = list(pool.map(one, range(repeats)))
    return digests[0], sum(digest != digests[0] for digest in digests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=100_000)
    parser.add_argument("--background", choices=("clean", "noisy"), default="noisy")
    parser.add_argument("--repeats", type=int, default=1000)
    parser.add_argument("--only", help="the candidates whose name contains this")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    found = {name: write for name, write in candidates().items() if args.only is None or args.only in name}
    blocks = classes(args.images, args.background)
    sample = [block[:640] for block in blocks[:8]]  # the written pickle (~0.5 MB), then other data
    if args.child:
        print(json.dumps({name: repeat_writes(write, sample, args.repeats, os.getpid())
                          for name, write in found.items()}))
        return
    total = sum(block.nbytes for block in blocks)
    print(f"{args.images:,} {args.background} images in {len(blocks)} classes ({total / 1e6:.0f} MB); "
          f"load {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores")
    print(f"{'candidate':<28}{'1 thread MB/s':>14}{'2 threads MB/s':>15}{'size MB':>9}")
    for name, write in found.items():
        single, size = speed(write, blocks, 1)
        double, _ = speed(write, blocks, 2)
        print(f"{name:<28}{single:>14.0f}{double:>15.0f}{size / 1e6:>9.1f}", flush=True)
    print(f"\ndeterminism: {args.repeats} writes of one pickle ({sample[0].nbytes / 1e6:.1f} MB), here and in two "
          "other processes at once (each: writes differing from its own first; its first equal to this one's?)")
    children = [subprocess.Popen([sys.executable, __file__, "--child", "--images", str(args.images), "--background",
                                  args.background, "--repeats", str(args.repeats)]
                                 + (["--only", args.only] if args.only else []), stdout=subprocess.PIPE, text=True)
                for _ in range(2)]
    references = {name: repeat_writes(write, sample, args.repeats, os.getpid()) for name, write in found.items()}
    others = [json.loads(child.communicate()[0].strip().splitlines()[-1]) for child in children]
    for name, (reference, differing) in references.items():
        verdicts = [f"{other[name][1]} differing, first {'equal' if other[name][0] == reference else 'DIFFERENT'}"
                    for other in others]
        print(f"  {name:<28}here {differing} differing; " + "; ".join(verdicts))
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
