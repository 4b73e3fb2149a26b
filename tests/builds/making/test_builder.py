"""The parallel builder on the local and processes sessions, resuming, and bad specs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

import glyphforge
from glyphforge._files import sha256_file
from glyphforge.builds import ARRAYS_FILE, BuiltDataset, ShardError, build, cache_params
from glyphforge.builds.making.shards import completed_shards, count_shards, shard_bounds, shard_path, shard_rng
from glyphforge.builds.reading.blocks import BLOCKS_FILE
from glyphforge.builds.reading.index import INDEX_FILE, ShardIndex
from glyphforge.cache import CacheStore
from glyphforge.cache.npy_members import iter_members
from glyphforge.session import open_session

from support.specs import NoiseSpec, assert_shard_6_fails_with_its_traceback, holder_of, made_shards
from support.waits import TIMEOUT, wait_until

TESTS_DIR = Path(__file__).resolve().parents[2]
#: A child process imports the support modules and this glyphforge (not an installed one).
CHILD_PATH = os.pathsep.join([str(TESTS_DIR), str(TESTS_DIR.parent)])


def _expected_arrays(spec: NoiseSpec) -> dict[str, np.ndarray]:
    """The arrays a build must produce, made here shard by shard from the definition."""
    seeds = np.random.SeedSequence(spec.seed).spawn(count_shards(spec.n_examples, spec.shard_size))
    shards = []
    for index, seed in enumerate(seeds):
        start, stop = shard_bounds(index, spec.n_examples, spec.shard_size)
        shards.append(spec.make_shard(index, np.random.default_rng(seed), stop - start))
    return {name: np.concatenate([shard[name] for shard in shards]) for name in shards[0]}


def _work_dir(spec: NoiseSpec, data_dir: Path) -> Path:
    return CacheStore.for_data_dir(data_dir).work_dir(spec.kind, cache_params(spec))


def _assert_same_arrays(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert sorted(actual) == sorted(expected)
    for name in expected:
        assert actual[name].dtype == expected[name].dtype
        assert actual[name].tobytes() == expected[name].tobytes()


# -- shards -------------------------------------------------------------------
def test_shard_plan_gives_the_last_shard_the_remainder():
    assert count_shards(50, 8) == 7
    assert [shard_bounds(i, 50, 8) for i in (0, 1, 6)] == [(0, 8), (8, 16), (48, 50)]
    assert count_shards(48, 8) == 6 and shard_bounds(5, 48, 8) == (40, 48)


def test_shard_rng_is_the_spawned_child_of_the_seed():
    children = np.random.SeedSequence(1234).spawn(40)
    for index in (0, 1, 17, 39):
        expected = np.random.default_rng(children[index]).integers(0, 2**63, size=8)
        assert np.array_equal(shard_rng(1234, index).integers(0, 2**63, size=8), expected)


# -- building -------------------------------------------------------------------
def test_local_build_concatenates_shards_in_order_and_caches(tmp_path, capsys):
    spec = NoiseSpec(n_examples=50, shard_size=8, seed=5)
    dataset = build(spec, data_dir=tmp_path)
    _assert_same_arrays(dataset.arrays, _expected_arrays(spec))
    assert np.array_equal(dataset["shard"], np.repeat(np.arange(7), [8] * 6 + [2]))
    assert len(dataset) == 50 and dataset["images"].shape == (50, 6, 5)
    assert dataset.path == tmp_path / "cache" / "test-noise" / dataset.key
    assert dataset.entry.meta["n_shards"] == 7
    assert dataset.entry.meta["layout"]["images"] == {"dtype": "|u1", "shape": [6, 5]}
    # the entry's single data file holds one gzip member per shard, in order
    assert [int(shard["shard"][0]) for shard in iter_members(dataset.path / ARRAYS_FILE)] == list(range(7))
    # each shard's run of gzip members: where it is and which rows it holds, in index.npy, and where its blocks are,
    # in blocks.npy (listed and hashed like arrays.pklz)
    assert dataset.entry.files == [ARRAYS_FILE, BLOCKS_FILE, INDEX_FILE] and "index" not in dataset.entry.meta
    table = ShardIndex.read(dataset.path / INDEX_FILE, "test")
    index = {name: getattr(table, name).tolist() for name in ("offset", "length", "start", "stop")}
    assert index["start"] == [0, 8, 16, 24, 32, 40, 48] and index["stop"] == [8, 16, 24, 32, 40, 48, 50]
    assert index["offset"] == [sum(index["length"][:i]) for i in range(7)]
    assert sum(index["length"]) == (dataset.path / ARRAYS_FILE).stat().st_size
    # the shards' work dir is gone once the entry is committed
    assert sorted(path.name for path in dataset.path.parent.iterdir() if not path.name.startswith(".")) == [
        dataset.key
    ]
    err = capsys.readouterr().err
    assert f"built test-noise {dataset.key[:12]}: 7 shards (7 made, 0 reused), 50 examples in " in err
    assert " on 1 workers (" in err and "shards 7/7" in err


def test_a_cache_hit_does_no_work_and_opens_no_session(tmp_path):
    spec = NoiseSpec(n_examples=20, shard_size=4, touch_dir=str(tmp_path / "made"))
    (tmp_path / "made").mkdir()
    first = build(spec, data_dir=tmp_path / "data", progress=False)
    assert made_shards(tmp_path / "made") == [0, 1, 2, 3, 4]
    again = build(spec, session="dask://127.0.0.1:1", data_dir=tmp_path / "data", progress=False)
    assert made_shards(tmp_path / "made") == [0, 1, 2, 3, 4]  # nothing made, no cluster contacted
    assert again.key == first.key
    _assert_same_arrays(again.arrays, first.arrays)


def test_session_options_open_the_session_only_when_there_is_work(tmp_path, capsys):
    spec = NoiseSpec(n_examples=12, shard_size=4)
    build(spec, session="processes", session_options={"n_workers": 2}, data_dir=tmp_path, progress=True)
    summary = capsys.readouterr().err
    assert "3 shards (3 made, 0 reused), 12 examples" in summary and " on 2 workers " in summary
    hit = build(spec, session="dask://127.0.0.1:1", session_options={"connect_timeout": 1}, data_dir=tmp_path,
                progress=False)
    assert len(hit) == 12  # a cache hit: the unreachable scheduler was never contacted
    with open_session("local") as session, pytest.raises(ValueError, match="session_options apply when build"):
        build(spec, session=session, session_options={"n_workers": 2}, data_dir=tmp_path / "other")


def test_output_depends_only_on_the_spec(tmp_path):
    spec = NoiseSpec(n_examples=33, shard_size=5, seed=9)
    local = build(spec, data_dir=tmp_path / "a", progress=False)
    with open_session("processes:2") as session:
        assert session.n_workers == 2
        parallel = build(spec, session=session, data_dir=tmp_path / "b", progress=False)
    assert parallel.key == local.key
    # byte-identical, not only equal arrays: gzip headers carry no file name and mtime 0
    again = build(spec, data_dir=tmp_path / "again", progress=False)
    digests = {sha256_file(dataset.path / ARRAYS_FILE) for dataset in (local, parallel, again)}
    assert len(digests) == 1 and local.entry.manifest["files"][ARRAYS_FILE]["sha256"] == digests.pop()
    _assert_same_arrays(parallel.arrays, _expected_arrays(spec))
    # what changes the output changes the key; what does not, does not
    assert build(replace(spec, delay=0.001), data_dir=tmp_path / "a", progress=False).key == local.key
    other = [replace(spec, seed=10), replace(spec, shard_size=6), replace(spec, n_examples=34)]
    assert len({build(s, data_dir=tmp_path / "c", progress=False).key for s in other} | {local.key}) == 4


def test_processes_session_string_and_locally_defined_spec(tmp_path):
    class Squares:  # defined in the test: travels to the workers by value (dill)
        kind = "test-squares"
        n_examples, shard_size, seed = 10, 3, 0

        def params(self):
            return {}

        def make_shard(self, index, rng, n):
            start = index * self.shard_size
            return {"x": np.arange(start, start + n) ** 2}

    dataset = build(Squares(), session="processes:2", data_dir=tmp_path, progress=False)
    assert dataset["x"].tolist() == [i * i for i in range(10)]


def test_build_gives_its_data_dir_to_shards_that_take_it_without_changing_the_key(tmp_path):
    seen = []

    class Recorder(NoiseSpec):
        def make_shard(self, index, rng, n, *, data_dir):
            seen.append(data_dir)
            return super().make_shard(index, rng, n)

    dataset = build(Recorder(n_examples=4, shard_size=2), data_dir=tmp_path, progress=False)
    assert seen == [str(tmp_path), str(tmp_path)]
    assert dataset.key == build(NoiseSpec(n_examples=4, shard_size=2), data_dir=tmp_path / "x",
                                progress=False).key


def test_prepare_runs_on_the_driver_once_before_any_shard_and_not_on_a_cache_hit(tmp_path):
    events = []

    class Prepared(NoiseSpec):
        def prepare(self, context):
            events.append(("prepare", context.data_dir))  # the build's DataContext

        def make_shard(self, index, rng, n):
            events.append(("shard", index))
            return super().make_shard(index, rng, n)

    spec = Prepared(n_examples=6, shard_size=2)
    build(spec, data_dir=tmp_path, progress=False)
    assert events == [("prepare", tmp_path), ("shard", 0), ("shard", 1), ("shard", 2)]
    build(spec, data_dir=tmp_path, progress=False)
    assert len(events) == 4  # a cache hit prepares nothing


def test_built_metadata_has_one_name(tmp_path):
    dataset = build(NoiseSpec(n_examples=3, shard_size=2), data_dir=tmp_path, progress=False)
    assert not hasattr(dataset, "meta")  # the manifest record is dataset.entry.meta
    assert dataset.metadata == {} and dataset.layout["shard"] == {"dtype": "<i4", "shape": []}


def test_default_data_dir_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", str(tmp_path))
    dataset = glyphforge.build(NoiseSpec(n_examples=3, shard_size=2), progress=False)
    assert dataset.path.is_relative_to(tmp_path / "cache")
    assert isinstance(dataset, glyphforge.BuiltDataset)


def test_built_dataset_indexing_errors(tmp_path):
    dataset = build(NoiseSpec(n_examples=3, shard_size=2), data_dir=tmp_path, progress=False)
    with pytest.raises(KeyError, match="test-noise has no array 'pixels'; it has images, labels, shard"):
        dataset["pixels"]
    with pytest.raises(IndexError):
        dataset[3]
    assert repr(dataset).startswith(f"<BuiltDataset test-noise {dataset.key[:12]}: 3 examples")
    assert BuiltDataset(dataset.entry).arrays["labels"].tolist() == dataset["labels"].tolist()


def test_built_dataset_is_map_style(tmp_path):
    spec = NoiseSpec(n_examples=11, shard_size=4)
    dataset = build(spec, data_dir=tmp_path, progress=False)
    expected = _expected_arrays(spec)
    image, targets = dataset[9]
    assert np.array_equal(image, expected["images"][9])
    assert sorted(targets) == ["labels", "shard"]
    assert targets["labels"] == expected["labels"][9] and targets["shard"] == 2
    images, targets = dataset[np.array([10, 0])]
    assert np.array_equal(images, expected["images"][[10, 0]])
    assert targets["shard"].tolist() == [2, 0]
    assert [len(pair[0]) for pair in [dataset[i] for i in range(len(dataset))]] == [6] * 11
    assert dataset.metadata == {}  # NoiseSpec has no metadata()
    batches = list(dataset.batches(batch_size=4, shuffle=True, seed=3, wrap=True))
    rng = np.random.default_rng(3)
    stream = np.concatenate([rng.permutation(11), rng.permutation(11)])  # the wrapped batch borrows from epoch 2
    assert len(batches) == 3
    for number, (images, targets) in enumerate(batches):
        indices = stream[4 * number : 4 * number + 4]
        assert np.array_equal(images, expected["images"][indices])
        assert np.array_equal(targets["labels"], expected["labels"][indices])
        assert np.array_equal(targets["shard"], expected["shard"][indices])


def test_take_reads_only_the_requested_examples_in_order(tmp_path):
    spec = NoiseSpec(n_examples=11, shard_size=4)
    expected = _expected_arrays(spec)
    build(spec, data_dir=tmp_path, progress=False)
    for wanted in ([10, 0, 4, 4], [], [3]):
        fresh = BuiltDataset(CacheStore.for_data_dir(tmp_path).get(spec.kind, cache_params(spec)))
        taken = fresh.take(wanted)
        assert fresh._arrays is None  # nothing but the requested rows was kept
        _assert_same_arrays(taken, {name: array[wanted] for name, array in expected.items()})
    loaded = build(spec, data_dir=tmp_path, progress=False)
    _ = loaded.arrays  # load every array: take() then indexes the loaded arrays
    _assert_same_arrays(loaded.take([7, 1]), {name: array[[7, 1]] for name, array in expected.items()})
    with pytest.raises(IndexError, match=r"example indices must be in -11\.\.10, got \[11\]"):
        loaded.take([11])


def test_built_dataset_keeps_the_spec_metadata(tmp_path):
    @dataclass
    class Described(NoiseSpec):
        def metadata(self) -> dict:
            return {"class_names": ["a", "b"], "shards_of": self.shard_size}

    dataset = build(Described(n_examples=5, shard_size=2), data_dir=tmp_path, progress=False)
    assert dataset.metadata == {"class_names": ["a", "b"], "shards_of": 2}
    assert BuiltDataset(CacheStore.for_data_dir(tmp_path).get(dataset.entry.kind, dataset.entry.params)).metadata \
        == {"class_names": ["a", "b"], "shards_of": 2}


# -- failures -----------------------------------------------------------------
@pytest.mark.parametrize("session", ["local", "processes:2"])
def test_a_raising_shard_fails_the_build_with_its_index_and_traceback(tmp_path, session):
    assert_shard_6_fails_with_its_traceback(session, tmp_path)


@pytest.mark.parametrize(
    ("arrays", "error", "message"),
    [
        ([1, 2], TypeError, "make_shard(0, rng, 2) returned list; it must return a non-empty dict"),
        ({}, TypeError, "make_shard(0, rng, 2) returned dict; it must return a non-empty dict"),
        ({"x": [1, 2]}, TypeError, "make_shard(0, rng, 2) returned 'x': list; it must return string names"),
        ({"x": np.zeros(3)}, ValueError, "make_shard(0, rng, 2) returned 'x' of shape (3,); the first axis"),
        ({"x": np.array([None, 1])}, TypeError,
         "make_shard(0, rng, 2) returned 'x' with dtype object; object arrays cannot be cached"),
        # torch's default collate batches neither (every DataLoader takes a built dataset): names go in as codes
        ({"x": np.zeros(2), "names": np.full((2, 3), "a")}, TypeError,
         "make_shard(0, rng, 2) returned 'names' with dtype <U1 and shape (2, 3), which torch's default collate "
         "cannot batch (every DataLoader must): give strings one per example at most, class names as integer codes "
         "with the names in metadata()'s 'class_names'"),
        ({"x": np.zeros(2), "day": np.zeros(2, "M8[D]")}, TypeError,
         "make_shard(0, rng, 2) returned 'day' with dtype datetime64[D] and shape (2,), which torch's default"),
        ({"x": np.zeros(2, [("a", "i4"), ("b", "f4")])}, TypeError,
         "make_shard(0, rng, 2) returned 'x' with dtype [('a', '<i4'), ('b', '<f4')] and shape (2,), which"),
    ],
)
def test_bad_make_shard_output_is_named(tmp_path, arrays, error, message):
    class Bad(NoiseSpec):
        def make_shard(self, index, rng, n):
            return arrays

    with pytest.raises(ShardError) as failure:
        build(Bad(n_examples=2, shard_size=2), data_dir=tmp_path, progress=False)
    assert f"{error.__name__}: {message}" in str(failure.value)


def test_shards_with_different_arrays_are_refused(tmp_path):
    class Drifting(NoiseSpec):
        def make_shard(self, index, rng, n):
            return {"x": np.zeros(n, dtype=np.int32 if index < 2 else np.int64)}

    with pytest.raises(ShardError, match=r"shard 2 of 'test-noise' returned arrays \{'x': \{'dtype': '<i8'"):
        build(Drifting(n_examples=12, shard_size=4), data_dir=tmp_path, progress=False)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"n_examples": 0}, ValueError, "spec.n_examples must be an integer >= 1, got 0"),
        ({"shard_size": 2.5}, ValueError, "spec.shard_size must be an integer >= 1, got 2.5"),
        ({"seed": -1}, ValueError, "spec.seed must be an integer >= 0, got -1"),
        ({"kind": "a/b"}, ValueError, "cache kind must be letters, digits"),
    ],
)
def test_bad_specs_are_named(tmp_path, change, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(")):
        build(replace(NoiseSpec(), **change), data_dir=tmp_path, progress=False)


def test_an_object_that_is_not_a_spec_is_refused(tmp_path):
    with pytest.raises(TypeError, match="dict is not a build spec: it lacks kind, n_examples, shard_size, seed, "
                                        "params, make_shard. A spec needs kind"):
        build({"kind": "x"}, data_dir=tmp_path)


# -- resuming -------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill -9", "Ctrl-C"])
def test_a_killed_build_resumes_with_only_the_missing_shards(tmp_path, sig):
    """Stopped while it makes shard 4, where it waits (held): the signal cannot race the build, whatever the load."""
    spec = NoiseSpec(n_examples=48, shard_size=4, seed=3)
    first_made, rerun_made = tmp_path / "first", tmp_path / "rerun"
    first_made.mkdir(), rerun_made.mkdir()
    request = tmp_path / "request.json"
    request.write_text(json.dumps({
        "spec": {"n_examples": 48, "shard_size": 4, "seed": 3, "touch_dir": str(first_made), "hold_shard": 4},
        "session": "local", "data_dir": str(tmp_path / "data"),
    }))
    child = subprocess.Popen([sys.executable, "-m", "support.build_child", str(request)],
                             env={**os.environ, "PYTHONPATH": CHILD_PATH}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    wait_until(lambda: holder_of(first_made, 4), "the child to hold shard 4", process=child)
    assert holder_of(first_made, 4) == child.pid
    os.kill(child.pid, sig)
    _, errors = child.communicate(timeout=TIMEOUT)
    assert child.returncode == -sig, errors  # Python re-raises an unhandled Ctrl-C as death by SIGINT
    if sig == signal.SIGINT:
        assert errors.rstrip().endswith("KeyboardInterrupt"), errors

    work_dir = _work_dir(spec, tmp_path / "data")
    finished = sorted(completed_shards(work_dir, 12))
    assert finished == [0, 1, 2, 3]
    # a shard file without its record (killed between the two writes) is made again
    shard_path(work_dir, 3).with_suffix(".json").unlink()
    kept = [0, 1, 2]

    dataset = build(replace(spec, touch_dir=str(rerun_made)), data_dir=tmp_path / "data", progress=False)
    assert made_shards(rerun_made) == [index for index in range(12) if index not in kept]
    _assert_same_arrays(dataset.arrays, _expected_arrays(spec))
    assert not work_dir.exists()


def test_a_corrupted_finished_shard_is_made_again(tmp_path):
    spec = NoiseSpec(n_examples=12, shard_size=4, fail_shard=2)
    with pytest.raises(ShardError):
        build(spec, data_dir=tmp_path, progress=False)
    work_dir = _work_dir(spec, tmp_path)
    assert sorted(completed_shards(work_dir, 3)) == [0, 1]
    damaged = bytearray(shard_path(work_dir, 1).read_bytes())
    damaged[20] ^= 0xFF
    shard_path(work_dir, 1).write_bytes(bytes(damaged))
    assert sorted(completed_shards(work_dir, 3)) == [0]

    (tmp_path / "made").mkdir()
    fixed = replace(spec, fail_shard=None, touch_dir=str(tmp_path / "made"))
    # fail_shard is part of params(): reuse the work dir of the failed key by moving it
    work_dir.rename(_work_dir(fixed, tmp_path))
    dataset = build(fixed, data_dir=tmp_path, progress=False)
    assert made_shards(tmp_path / "made") == [1, 2]
    _assert_same_arrays(dataset.arrays, _expected_arrays(replace(fixed, touch_dir=None)))


def test_resume_trusts_size_and_mtime_then_the_join_catches_a_silently_changed_shard(tmp_path):
    spec = NoiseSpec(n_examples=12, shard_size=4, fail_shard=2)
    with pytest.raises(ShardError):
        build(spec, data_dir=tmp_path, progress=False)
    (tmp_path / "made").mkdir()
    fixed = replace(spec, fail_shard=None, touch_dir=str(tmp_path / "made"))
    work_dir = _work_dir(spec, tmp_path)
    work_dir.rename(_work_dir(fixed, tmp_path))
    work_dir = _work_dir(fixed, tmp_path)
    # bit rot: shard 1 changes but keeps its size and modification time, so resuming reuses it ...
    path = shard_path(work_dir, 1)
    before = path.stat()
    damaged = bytearray(path.read_bytes())
    damaged[30] ^= 0xFF
    path.write_bytes(bytes(damaged))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert sorted(completed_shards(work_dir, 3)) == [0, 1]
    # ... and joining the shards checks its sha256: it is made again, not cached damaged
    dataset = build(fixed, data_dir=tmp_path, progress=False)
    assert made_shards(tmp_path / "made") == [1, 2]
    _assert_same_arrays(dataset.arrays, _expected_arrays(replace(fixed, touch_dir=None)))
    assert CacheStore.for_data_dir(tmp_path).verify() == []
