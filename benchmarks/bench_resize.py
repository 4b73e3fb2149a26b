"""Images per second of `glyphforge.resize` against per-image loops of Pillow, OpenCV, scikit-image.

    python benchmarks/bench_resize.py [--quick] [--repeat 5] [--threads N]

Workloads (the issue's): 200,000 x 28x28 -> 14x14 and 32,460 x 105x105 -> 28x28, uint8,
white strokes on black: the real Omniglot images from ``../shared/data`` (5,840 of them,
inverted; shrunk to 28x28 by area averaging for the first workload) tiled to the batch
size, or random strokes when that folder is absent (the output says which). ``--quick``
runs a tenth of each batch.

Every figure is the median of ``--repeat`` runs, in images per second, with its ratio to a
Pillow ``BILINEAR`` per-image loop returning arrays, measured in the same run. glyphforge
writes into a reused ``out=`` buffer (and once into fresh memory); its results are checked
equal to Pillow's (box/bilinear/lanczos) and OpenCV ``INTER_AREA``'s (area) on the
first 2,000 images. scikit-image runs on a subset. ``np.copyto`` of the input into a
reused buffer is the memory ceiling. Small-batch rows give the cost of one call.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))

from glyphforge.pipelines.decode import decode_image  # noqa: E402
from glyphforge.pipelines.resize import resize  # noqa: E402

PILLOW = {"box": Image.BOX, "bilinear": Image.BILINEAR, "lanczos": Image.LANCZOS}
CHECKED = 2_000
SKIMAGE_SUBSET = 2_000


def omniglot_strokes() -> tuple[np.ndarray, str]:
    """All carried Omniglot images, white on black, or random strokes when absent."""
    archives = sorted((SHARED_DATA / "omniglot").glob("images_background_small*.zip"))
    images = []
    for path in archives:
        with zipfile.ZipFile(path) as archive:
            names = sorted(n for n in archive.namelist() if n.endswith(".png"))
            images += [decode_image(archive.read(name), name=name) for name in names]
    if images:
        return 255 - np.stack(images), f"{len(images):,} real Omniglot images from {SHARED_DATA / 'omniglot'}"
    rng = np.random.default_rng(0)
    strokes = []
    for _ in range(2_000):
        canvas = Image.new("L", (105, 105))
        draw = ImageDraw.Draw(canvas)
        for _ in range(rng.integers(1, 5)):
            draw.line([tuple(p) for p in rng.integers(10, 95, (rng.integers(2, 6), 2))], fill=255, width=3)
        strokes.append(np.asarray(canvas))
    return np.stack(strokes), "2,000 random strokes (../shared/data absent)"


def tile(images: np.ndarray, count: int) -> np.ndarray:
    return np.ascontiguousarray(images[np.arange(count) % len(images)])


def median_rate(run: Callable[[], object], count: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return count / statistics.median(times)


def pillow_loop(images: np.ndarray, shape: tuple[int, int], method: str, out: np.ndarray) -> None:
    size, resample = (shape[1], shape[0]), PILLOW[method]
    for i, image in enumerate(images):
        out[i] = np.asarray(Image.fromarray(image).resize(size, resample))


def opencv_loop(cv2, images: np.ndarray, shape: tuple[int, int], interpolation: int, out: np.ndarray) -> None:
    size = (shape[1], shape[0])
    for i, image in enumerate(images):
        out[i] = cv2.resize(image, size, interpolation=interpolation)


def skimage_loop(images: np.ndarray, shape: tuple[int, int], out: np.ndarray) -> None:
    from skimage.transform import resize as sk_resize

    for i, image in enumerate(images):
        out[i] = np.rint(sk_resize(image, shape, anti_aliasing=True, preserve_range=True))


def check_exact(images: np.ndarray, shape: tuple[int, int], cv2) -> str:
    sample = images[:CHECKED]
    failures = []
    for method in PILLOW:
        expected = np.empty((len(sample), *shape), np.uint8)
        pillow_loop(sample, shape, method, expected)
        if not np.array_equal(resize(sample, shape, method=method), expected):
            failures.append(method)
    if cv2 is not None:
        expected = np.empty((len(sample), *shape), np.uint8)
        opencv_loop(cv2, sample, shape, cv2.INTER_AREA, expected)
        if not np.array_equal(resize(sample, shape, method="area"), expected):
            failures.append("area")
    return "NOT EXACT: " + ", ".join(failures) if failures else "all exact"


def bench_workload(images: np.ndarray, shape: tuple[int, int], repeat: int, cv2) -> tuple[dict[str, float], str]:
    """Images per second of every contender on one workload."""
    count = len(images)
    out = np.empty((count, *shape), np.uint8)
    rates: dict[str, float] = {}
    for method in PILLOW:
        run = lambda method=method: pillow_loop(images, shape, method, out)  # noqa: E731
        rates[f"Pillow {method.upper()} loop"] = median_rate(run, count, repeat)
    if cv2 is not None:
        for name in ("INTER_AREA", "INTER_LINEAR"):
            flag = getattr(cv2, name)
            run = lambda flag=flag: opencv_loop(cv2, images, shape, flag, out)  # noqa: E731
            rates[f"OpenCV {name} loop"] = median_rate(run, count, repeat)
    try:
        subset, sk_out = images[:SKIMAGE_SUBSET], out[:SKIMAGE_SUBSET]
        rates[f"scikit-image anti_aliasing loop ({SKIMAGE_SUBSET:,})"] = median_rate(
            lambda: skimage_loop(subset, shape, sk_out), len(subset), 1
        )
    except ImportError:
        pass
    for method in (*PILLOW, "area"):
        resize(images[:1024], shape, method=method)  # compile or load from numba's cache; start the threads
        run = lambda method=method: resize(images, shape, method=method, out=out)  # noqa: E731
        rates[f"glyphforge {method}"] = median_rate(run, count, repeat)
    rates["glyphforge box, fresh output"] = median_rate(lambda: resize(images, shape, method="box"), count, repeat)
    reused = np.empty_like(images)
    rates["np.copyto into reused buffer"] = median_rate(lambda: np.copyto(reused, images), count, repeat)
    return rates, check_exact(images, shape, cv2)


def call_costs(images: np.ndarray, shape: tuple[int, int]) -> dict[str, float]:
    """Microseconds per call for one image and for 8 images, glyphforge and Pillow."""
    costs = {}
    for label, batch in (("1 image", images[:1]), ("8 images", images[:8])):
        out = np.empty((len(batch), *shape), np.uint8)
        resize(batch, shape, out=out)
        calls = 2_000
        costs[f"glyphforge box, {label}"] = 1e6 / median_rate(
            lambda batch=batch, out=out, calls=calls: [resize(batch, shape, out=out) for _ in range(calls)], calls, 5
        )
        costs[f"Pillow BOX loop, {label}"] = 1e6 / median_rate(
            lambda batch=batch, out=out, calls=calls: [pillow_loop(batch, shape, "box", out) for _ in range(calls)],
            calls,
            5,
        )
    return costs


#: The issue's goals: (workload, glyphforge method, reference row, least ratio).
GOALS = (
    ("28x28 -> 14x14", "box", "Pillow BILINEAR loop", 20.0),
    ("28x28 -> 14x14", "box", "OpenCV INTER_AREA loop", 2.0),
    ("28x28 -> 14x14", "bilinear", "Pillow BILINEAR loop", 15.0),
    ("105x105 -> 28x28", "bilinear", "Pillow BILINEAR loop", 6.0),
    ("28x28 -> 14x14", "lanczos", "Pillow BILINEAR loop", 8.0),
)


def goal_lines(results: dict[str, dict[str, float]]) -> list[str]:
    """One line per goal of the issue: the ratio measured in this run and whether it is reached."""
    lines = []
    for workload, method, reference, least in GOALS:
        rates = results[workload]
        if reference not in rates:
            lines.append(f"{workload} {method} vs {reference}: not measured (install opencv-python-headless)")
            continue
        ratio = rates[f"glyphforge {method}"] / rates[reference]
        lines.append(f"{workload} {method} vs {reference}: {ratio:.1f}x (goal {least:g}x: "
                     f"{'met' if ratio >= least else 'MISSED'})")
    return lines


def describe_machine() -> str:
    import numba

    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor())
    versions = [f"Python {platform.python_version()}", f"numpy {np.__version__}", f"numba {numba.__version__}",
                f"Pillow {Image.__version__}"]
    for module in ("cv2", "skimage"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except ImportError:
            pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    from glyphforge.pipelines.resize import _thread_count

    return (f"{cpu}, {os.cpu_count()} CPUs, {_thread_count()} resize threads, load average {load:.2f}\n"
            + ", ".join(versions))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of each batch")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median)")
    parser.add_argument("--threads", type=int, help="threads of large resizes (default: one per core)")
    args = parser.parse_args(argv)
    import numba

    if args.threads:  # what $NUMBA_NUM_THREADS sets; glyphforge.resize reads it per call
        numba.config.NUMBA_NUM_THREADS = args.threads
    try:
        import cv2
    except ImportError:
        cv2 = None
    strokes, source = omniglot_strokes()
    scale = 10 if args.quick else 1
    workloads = {
        "28x28 -> 14x14": (tile(resize(strokes, (28, 28), method="area"), 200_000 // scale), (14, 14)),
        "105x105 -> 28x28": (tile(strokes, 32_460 // scale), (28, 28)),
    }
    print(f"images: {source}")
    results, checks = {}, {}
    for name, (images, shape) in workloads.items():
        results[name], checks[name] = bench_workload(images, shape, args.repeat, cv2)
    print(describe_machine())
    reference = "Pillow BILINEAR loop"
    header = " | ".join(f"{name} ({len(workloads[name][0]):,})" for name in workloads)
    print(f"\n| images/s (ratio to {reference}) | {header} |\n| --- |" + " --- |" * len(workloads))
    for row in results[next(iter(workloads))]:
        cells = [f"{rates[row]:,.0f} ({rates[row] / rates[reference]:.2f})" for rates in map(results.get, workloads)]
        print(f"| {row} | " + " | ".join(cells) + " |")
    print("\ngoals (2 cores, exact output):\n  " + "\n  ".join(goal_lines(results)))
    print("\nexactness on the first 2,000 images: " + "; ".join(f"{name}: {check}" for name, check in checks.items()))
    print("\n| cost of one call, 28x28 -> 14x14 | us |\n| --- | --- |")
    for row, micros in call_costs(workloads["28x28 -> 14x14"][0], (14, 14)).items():
        print(f"| {row} | {micros:.1f} |")


if __name__ == "__main__":
    main()
