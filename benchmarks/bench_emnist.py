"""EMNIST byclass: conversion, 14x14 variant and loading, against the old script's approach.

    python benchmarks/bench_emnist.py [--quick] [--workdir DIR] [--repeats 3] [--backgrounds clean noisy]

Builds full-size synthetic byclass ``gzip.zip`` archives (697,932 + 116,323 stroke-like images
in NIST's layout, tests/support/synthetic_emnist.py) once in ``--workdir`` and reuses them: one
with clean (zero) backgrounds, one with sensor-like noise 0-7 on every background pixel, which
compresses poorly (``--backgrounds``: both by default). On each archive it times, each step in a
fresh process (so peak RSS is that step's own):

* conversion: ``prepare_emnist(archives={"gzip.zip": ...}, verify=False)`` from the local zip;
* the 14x14 variant from the 28x28 entry (numba's first call, which loads its on-disk
  cache, is made and reported before timing);
* ``load_emnist(subset="all")`` of the 10 digit classes and of all 62 classes (median of ``--repeats``).

The old approach is re-implemented straightforwardly (``unzip``/``gunzip`` equivalents
through zipfile and stdlib gzip, ``array('B')`` + a per-image Python loop to parse,
boolean masks per class, ``gzip.open`` level 9 + ``dill.dump`` per class; per-image
scikit-image ``resize(preserve_range=True)`` for 14x14; ``gzip.open`` + ``dill.load`` per
class, ``np.concatenate`` and a permutation to load), run on a subset and extrapolated by
image count or bytes; its decompression, concatenation and shuffling are timed at full size.
``--quick`` uses an archive an eighth of the size and smaller subsets (ratios only).

With ``--torchvision-python PY`` (a venv of its own with torch 2.14.1 + torchvision 0.29.1,
benchmarks/README.md), what a user would pick instead is timed on the same archive, each in a
fresh process (benchmarks/torchvision_emnist.py): torchvision's steps after its download
(extract the zip, gunzip every member into ``raw/``) against the conversion (goal: glyphforge
>= 2x), and ``EMNIST(root, "byclass", train=True)`` + ``train=False`` from the raw IDX files
against loading all 62 classes (goal >= 1x) and the 10 digits (goal >= 2x; torchvision must
load everything to filter).

Each ratio is also given against the old tool's own full-size times from the issues
("ref old s", the fastest seen; scaled by image count with ``--quick``; none known for the
14x14 variant of the noisy archive); a goal counts as met only when both ratios reach it.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from array import array
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

FULL = (697_932, 116_323)
QUICK = (87_242, 14_540)
GOALS = {"conversion": 40.0, "14x14": 50.0, "load 62": 3.0}
BACKGROUNDS = ("clean", "noisy")
#: The old tool's own times on full-size archives (issues 17 and 32, 2-core machines): fastest seen, per background.
REFERENCE_OLD_S: dict[str, dict[str, float | None]] = {
    "clean": {"conversion": 62.0, "14x14": 92.0, "load 10": 0.6, "load 62": 3.6},
    "noisy": {"conversion": 87.5, "14x14": None, "load 10": 0.8, "load 62": 9.4},
}
PEAK_GOAL_MB = 1300
DIGITS = "0123456789"
TRAIN_IMAGES = "gzip/emnist-byclass-train-images-idx3-ubyte.gz"
TRAIN_LABELS = "gzip/emnist-byclass-train-labels-idx1-ubyte.gz"
TEST_IMAGES = "gzip/emnist-byclass-test-images-idx3-ubyte.gz"


def peak_mb() -> float:
    """This process's peak RSS in MB (VmHWM: unlike ru_maxrss, not inherited from the parent)."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1024)


# -- new path (children) ---------------------------------------------------------
def child_convert(archive: Path, data_dir: Path) -> dict:
    from glyphforge.datasets.emnist import prepare_emnist

    started, cpu = time.perf_counter(), time.process_time()
    [entry] = prepare_emnist(archives={"gzip.zip": archive}, verify=False, data_dir=data_dir, progress=False)
    return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "peak_mb": peak_mb(),
            "n_images": entry.meta["n_images"], "bytes": entry.size_bytes}


def child_resize(archive: Path, data_dir: Path) -> dict:
    from glyphforge.datasets.emnist import prepare_emnist
    from glyphforge.pipelines.resize import resize

    started = time.perf_counter()
    resize(np.zeros((4, 28, 28), np.uint8), (14, 14), method="box", batch=True)
    first_call = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()  # the 28x28 entry is found, from the same own copy
    prepare_emnist(archives={"gzip.zip": archive}, verify=False, shapes=[(14, 14)], data_dir=data_dir, progress=False)
    return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "first_call": first_call,
            "peak_mb": peak_mb()}


def child_load(classes: str | None, data_dir: Path, repeats: int) -> dict:
    from glyphforge.datasets.emnist import load_emnist

    times, cpus = [], []
    for repeat in range(repeats):
        started, cpu = time.perf_counter(), time.process_time()
        x, y, _ = load_emnist(classes, subset="all", data_dir=data_dir, seed=repeat, download=False)
        times.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
        del x, y
    return {"seconds": statistics.median(times), "cpu": statistics.median(cpus), "all": times, "peak_mb": peak_mb()}


# -- the old approach, on subsets (child) ----------------------------------------------
def old_parse(raw: bytes) -> np.ndarray:
    """The old tool's parse: ``array('B')`` and one Python iteration per image."""
    size, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    image_data = array("B", raw[16:])
    images = np.zeros((size, rows * cols), dtype=np.uint8)
    for i in range(size):
        images[i][:] = image_data[i * rows * cols:(i + 1) * rows * cols]
    return np.array(images, dtype=np.uint8)


def old_write(path: Path, images: np.ndarray) -> None:
    import dill

    with gzip.open(path, "wb") as stream:  # level 9, the gzip module's default
        dill.dump(images, stream, protocol=dill.HIGHEST_PROTOCOL)


def old_read(path: Path) -> np.ndarray:
    import dill

    with gzip.open(path, "rb") as stream:
        return dill.load(stream)


def child_old(archive: Path, data_dir: Path, subset: int) -> dict:
    """Time the old approach's parts; return per-image and per-byte rates to extrapolate."""
    from skimage.transform import resize as skimage_resize

    from glyphforge.datasets.emnist import load_emnist

    scratch = Path(tempfile.mkdtemp(prefix="old-", dir=data_dir))
    result: dict[str, float] = {}
    started = time.perf_counter()  # unzip + gunzip of the four byclass members, full size
    with zipfile.ZipFile(archive) as zf:
        for name in (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TRAIN_LABELS.replace("train", "test")):
            packed = scratch / Path(name).name
            packed.write_bytes(zf.read(name))
            with gzip.open(packed) as stream:
                packed.with_suffix("").write_bytes(stream.read())
    result["extract_s"] = time.perf_counter() - started
    raw = (scratch / Path(TRAIN_IMAGES).name).with_suffix("").read_bytes()
    labels = np.frombuffer((scratch / Path(TRAIN_LABELS).name).with_suffix("").read_bytes()[8:], np.uint8)[:subset]
    head = raw[:4] + subset.to_bytes(4, "big") + raw[8:16 + subset * 784]
    del raw
    started = time.perf_counter()
    flat = old_parse(head)
    result["parse_s_per_image"] = (time.perf_counter() - started) / subset
    started = time.perf_counter()  # the old grouping: concatenate train and test, moveaxis, one mask per class
    x = np.moveaxis(np.concatenate((flat[: subset // 2], flat[subset // 2:]), 0).reshape(-1, 28, 28), 1, 2)
    per_class = [x[labels == label] for label in range(62)]
    result["group_s_per_image"] = (time.perf_counter() - started) / subset
    written = sorted(per_class, key=len)[-3:]
    started = time.perf_counter()
    for index, images in enumerate(written):
        old_write(scratch / f"{index}.pklz", images)
    result["write9_s_per_byte"] = (time.perf_counter() - started) / sum(a.nbytes for a in written)
    started = time.perf_counter()
    reread = [old_read(scratch / f"{index}.pklz") for index in range(len(written))]
    result["read9_s_per_byte"] = (time.perf_counter() - started) / sum(a.nbytes for a in reread)
    sample = np.concatenate(reread)[: max(1, subset // 16)]
    started = time.perf_counter()
    small = np.array([skimage_resize(image, (14, 14), preserve_range=True) for image in sample]).astype("uint8")
    result["skimage_s_per_image"] = (time.perf_counter() - started) / len(sample)
    started = time.perf_counter()
    old_write(scratch / "small.pklz", small)
    result["write9_small_s_per_byte"] = (time.perf_counter() - started) / small.nbytes
    result["level9_mb_per_s"] = 1e-6 / result["write9_s_per_byte"]
    for name, classes in (("digits", DIGITS), ("all", None)):  # the old loader's in-memory part, full size
        blocks = [load_emnist(c, subset="all", data_dir=data_dir, seed=0, download=False)[0]
                  for c in (classes or _all_classes())]
        started = time.perf_counter()
        x = np.concatenate(blocks, axis=0)
        y = np.concatenate([np.full((len(b), 1), i) for i, b in enumerate(blocks)])
        order = np.random.permutation(x.shape[0])
        x, y = x[order, :], y[order, :]
        result[f"shuffle_{name}_s"] = time.perf_counter() - started
        result[f"bytes_{name}"] = x.nbytes
        del blocks, x, y
    return result


def _all_classes() -> list[str]:
    from glyphforge.datasets.emnist import emnist_classes

    return emnist_classes("byclass")


# -- orchestration -------------------------------------------------------------------
def run_child(step: str, archive: Path, data_dir: Path, extra: str, repeats: int = 1) -> dict:
    command = [sys.executable, __file__, "--child", step, "--archive", str(archive), "--data-dir", str(data_dir),
               "--child-arg", extra, "--repeats", str(repeats)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the {step} step failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_archive(workdir: Path, counts: tuple[int, int], background: str) -> Path:
    from support.synthetic_emnist import write_synthetic_emnist

    path = workdir / f"gzip-byclass-{counts[0]}-{counts[1]}{'' if background == 'clean' else '-' + background}.zip"
    if not path.is_file():
        print(f"writing the synthetic archive {path} (once) ...", flush=True)
        started = time.perf_counter()
        partial = path.with_suffix(".partial")
        write_synthetic_emnist(partial, {"byclass": counts}, keep_arrays=False, background=background)
        partial.rename(path)
        print(f"  {path.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - started:.0f} s", flush=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="an archive 1/8 the size, smaller subsets")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "glyphforge-bench-emnist")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backgrounds", nargs="+", choices=BACKGROUNDS, default=list(BACKGROUNDS),
                        help="the archives to run on: clean (zero) backgrounds, noisy (0-7) ones, or both (default)")
    parser.add_argument("--torchvision-python", type=Path,
                        help="the python of a venv with torchvision: time torchvision's own steps beside glyphforge's")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--archive", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-arg", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        steps = {
            "convert": lambda: child_convert(args.archive, args.data_dir),
            "resize": lambda: child_resize(args.archive, args.data_dir),
            "load": lambda: child_load(args.child_arg or None, args.data_dir, args.repeats),
            "old": lambda: child_old(args.archive, args.data_dir, int(args.child_arg)),
        }
        print(json.dumps(steps[args.child]()))
        return
    report(args)


def report(args: argparse.Namespace) -> None:
    counts = QUICK if args.quick else FULL
    args.workdir.mkdir(parents=True, exist_ok=True)
    archives = {background: build_archive(args.workdir, counts, background) for background in args.backgrounds}
    summary = [report_archive(args, counts, background, archive) for background, archive in archives.items()]
    print("\nconversion, per archive (prep's speed as a ratio to the old tool's code, same run / ref):")
    for line in summary:
        print(f"  {line}")


def report_archive(args: argparse.Namespace, counts: tuple[int, int], background: str, archive: Path) -> str:
    """Time every step on ``archive`` and print its table; return the conversion's one-line summary."""
    data_dir = Path(tempfile.mkdtemp(prefix="data-", dir=args.workdir))
    load_before = f"{os.getloadavg()[0]:.2f}"
    n_images = sum(counts)
    print(f"\nEMNIST byclass, {n_images:,} synthetic images, {background} backgrounds "
          f"({archive.stat().st_size / 1e6:.0f} MB){' (QUICK: 1/8 size)' if args.quick else ''}; "
          f"{os.cpu_count()} cores", flush=True)
    convert = run_child("convert", archive, data_dir, "")
    resized = run_child("resize", archive, data_dir, "")
    loads = {name: run_child("load", archive, data_dir, classes, args.repeats)
             for name, classes in (("digits", DIGITS), ("all", ""))}
    old = run_child("old", archive, data_dir, str(10_000 if args.quick else 50_000))
    raw_bytes = n_images * 784
    old_convert = (old["extract_s"] + n_images * (old["parse_s_per_image"] + old["group_s_per_image"])
                   + raw_bytes * old["write9_s_per_byte"])
    old_resize = (raw_bytes * old["read9_s_per_byte"] + n_images * old["skimage_s_per_image"]
                  + n_images * 196 * old["write9_small_s_per_byte"])
    old_load = {name: old[f"bytes_{name}"] * old["read9_s_per_byte"] + old[f"shuffle_{name}_s"] for name in loads}
    rows = [
        ("conversion", convert, old_convert),
        ("14x14", resized, old_resize),
        ("load 10", loads["digits"], old_load["digits"]),
        ("load 62", loads["all"], old_load["all"]),
    ]
    print(f"load average before: {load_before}, after: {os.getloadavg()[0]:.2f} (other processes slow every figure)")
    print(f"{'step':<12}{'new s':>7}{'cpu s':>7}{'old s':>8}{'ratio':>8}{'ref old s':>11}{'vs ref':>8}"
          "  goal (on both ratios)")
    for name, measured, before in rows:
        new = measured["seconds"]
        full_reference = REFERENCE_OLD_S[background][name]
        reference = None if full_reference is None else full_reference * n_images / sum(FULL)  # scaled for --quick
        worst = before / new if reference is None else min(before, reference) / new
        goal = f">= {GOALS[name]:.0f}x {'met' if worst >= GOALS[name] else 'MISSED'}" if name in GOALS else ""
        versus = ("" if reference is None else f"{reference:.1f}").rjust(11) + (
            "" if reference is None else f"{reference / new:.1f}x").rjust(8)
        print(f"{name:<12}{new:>7.2f}{measured['cpu']:>7.2f}{before:>8.1f}{before / new:>7.1f}x{versus}  {goal}")
    verdict = "met" if convert["peak_mb"] <= PEAK_GOAL_MB else "MISSED"
    print(f"\npeak RSS: conversion {convert['peak_mb']:.0f} MB (goal <= {PEAK_GOAL_MB} MB: {verdict}), "
          f"14x14 {resized['peak_mb']:.0f} MB, load 62 {loads['all']['peak_mb']:.0f} MB")
    print(f"numba first resize call (on-disk cache load or compile, not timed above): {resized['first_call']:.2f} s")
    print(f"load runs (s): digits {[round(t, 2) for t in loads['digits']['all']]}, "
          f"all {[round(t, 2) for t in loads['all']['all']]}")
    print("old approach, measured parts: "
          f"unzip+gunzip {old['extract_s']:.1f} s (full), parse {1e6 * old['parse_s_per_image']:.1f} us/image, "
          f"level-9 writes {old['level9_mb_per_s']:.1f} MB/s, level-9 reads {1e-6 / old['read9_s_per_byte']:.0f} MB/s, "
          f"scikit-image resize {1 / old['skimage_s_per_image']:,.0f} images/s, "
          f"concat+shuffle {old['shuffle_all_s']:.2f} s (all, full size)")
    print(f"cache entries: 28x28 {convert['bytes'] / 1e6:.0f} MB; data dir {data_dir} (delete when done)")
    if args.torchvision_python:
        report_torchvision(args.torchvision_python, archive, data_dir, convert, loads, args.repeats)
    reference = REFERENCE_OLD_S[background]["conversion"]
    scaled = None if reference is None else reference * n_images / sum(FULL)
    return (f"{background}: {convert['seconds']:.2f} s, {old_convert / convert['seconds']:.1f}x the old code "
            f"({old_convert:.1f} s)" + ("" if scaled is None else f", {scaled / convert['seconds']:.1f}x ref "
                                        f"({scaled:.1f} s)") + f" (goal >= {GOALS['conversion']:.0f}x)")


def report_torchvision(python: Path, archive: Path, data_dir: Path, convert: dict, loads: dict,
                       repeats: int) -> None:
    """Time torchvision's own steps on ``archive`` (fresh processes) and print glyphforge's ratio to each."""
    script, root = Path(__file__).with_name("torchvision_emnist.py"), data_dir / "torchvision"

    def run(*step: str) -> dict:
        done = subprocess.run([str(python), str(script), *step], capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"torchvision's {step[0]} failed:\n{done.stderr}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    prep = run("prep", str(archive), str(root))
    load = statistics.median(run("load", str(root))["seconds"] for _ in range(repeats))
    rows = [("prep", prep["seconds"], convert["seconds"], 2.0, "extract + gunzip into raw/ / conversion"),
            ("load 62", load, loads["all"]["seconds"], 1.0, "EMNIST(byclass) train + test / all 62 classes"),
            ("load 10", load, loads["digits"]["seconds"], 2.0, "the same full load / the 10 digits")]
    print(f"torchvision (same archive, fresh processes; prep peak {prep['peak_mb']:.0f} MB):")
    for name, theirs, ours, goal, what in rows:
        verdict = "met" if theirs / ours >= goal else "MISSED"
        print(f"  {name:<8} torchvision {theirs:6.2f} s, glyphforge {ours:6.2f} s: {theirs / ours:5.2f}x "
              f"(goal >= {goal:.0f}x {verdict}; {what})")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
