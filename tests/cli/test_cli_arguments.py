"""Issue #22, rows 7, 13, 16, 17 (data dir, a worker's full disk), 19 and 20: arguments are checked before any work.

The commands run in this process (`run_here`) where what they say is the point; as real subprocesses
(`run`) where the process is: a worker's full disk, and prepare-data's exit status. A bad argument exits 2 with
one paragraph saying what was wrong and what to give, before anything is done: the data
dir named on the command line is not even created, nothing is downloaded, no worker
starts, and a cache hit does not hide it.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from glyphforge import build, cli, load_emnist, prepare_emnist
from glyphforge.cache import CacheStore
from glyphforge.cli import args as cli_args
from glyphforge.scenes.spec import ScatteredGlyphs

from support.cli import run, run_here
from support.mounts import small_disk  # noqa: F401 (fixture)
from support.synthetic_emnist import gzip_bytes, idx_header, member_names, replace_members, write_synthetic_emnist

OFFLINE = {"GLYPHFORGE_OFFLINE": "1"}
FONT_SCENES = ("build", "scenes", "--glyphs", "font", "--n-examples", "5", "--shard-size", "5")


def refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    """Assert ``result`` is a usage error (exit 2, no traceback) whose message holds every one of ``words``."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    for word in words:
        assert word in result.stderr, result.stderr


@pytest.fixture(scope="module")
def emnist_zip(tmp_path_factory) -> Path:
    return write_synthetic_emnist(tmp_path_factory.mktemp("emnist") / "gzip.zip").path


@pytest.fixture(scope="module")
def prepared_emnist(emnist_zip, tmp_path_factory) -> Path:
    """A data dir holding EMNIST byclass 28x28, prepared from the synthetic archive."""
    data_dir = tmp_path_factory.mktemp("prepared")
    result = run("prepare-data", "emnist", "--emnist-archive", emnist_zip, "--no-verify", "--no-warmup", "-q",
                 "--data-dir", data_dir)
    assert result.returncode == 0, result.stderr
    return data_dir


@pytest.fixture(scope="module")
def built_scenes(tmp_path_factory) -> Path:
    """A data dir holding one build of `FONT_SCENES` (so running it again is a cache hit)."""
    data_dir = tmp_path_factory.mktemp("built")
    result = run("glyphforge", *FONT_SCENES, "--data-dir", data_dir, "-q")
    assert result.returncode == 0, result.stderr
    return data_dir


# row 7: characters the bundled font lacks ---------------------------------------------------------------
def test_characters_the_font_lacks_are_named_and_refused(tmp_path):
    """They used to build, every one drawn as the same missing-glyph box under its own label."""
    data_dir = tmp_path / "data"
    result = run_here("glyphforge", *FONT_SCENES, "--characters", "aé漢字🙂", "--data-dir", data_dir)
    refused(result, "Pillow's bundled font has no glyph for 4 characters 'é字漢🙂' (U+00E9, U+5B57, U+6F22, U+1F642)",
            "missing-glyph box", "EMNIST/Omniglot glyphs")
    assert not data_dir.exists()


# row 13: one multi-character class name ------------------------------------------------------------------
def test_one_fashion_mnist_class_name_is_that_class_not_its_letters(tmp_path):
    """``--characters Bag`` used to mean the classes B, a and g (exit 2); now it prepares Fashion-MNIST for Bag."""
    data_dir = tmp_path / "data"
    result = run_here("glyphforge", "build", "scenes", "--glyphs", "fashion-mnist", "--characters", "Bag",
                      "--n-examples", "5", "--data-dir", data_dir, env=OFFLINE)
    assert result.returncode == 1 and "unknown" not in result.stderr  # accepted: it went on to fetch the data
    assert "place the file at" in result.stderr and "fashion-mnist" in result.stderr
    parse = cli._glyphforge_parser().parse_args
    for name in ("Bag", "T-shirt/top", "Ankle boot"):
        spec = cli_args.scene_spec(parse(["build", "scenes", "--glyphs", "fashion-mnist", "--characters", name]))
        assert spec.characters == (name,)
    assert ScatteredGlyphs(5, glyphs="kmnist", characters="ki").characters == ("ki",)
    assert ScatteredGlyphs(5, glyphs="emnist", characters="ab").characters == ("a", "b")


def test_an_unknown_class_name_lists_the_known_ones_and_hints_at_commas(tmp_path):
    data_dir = tmp_path / "data"
    result = run_here("glyphforge", "build", "scenes", "--glyphs", "fashion-mnist", "--characters", "Bags",
                      "--n-examples", "5", "--data-dir", data_dir, env=OFFLINE)
    refused(result, "unknown fashion-mnist classes ['B', 'a', 'g', 's']", "the known ones are T-shirt/top, Trouser",
            "several separated by commas (e.g. 'T-shirt/top,Trouser')")
    assert not (data_dir / "raw").exists()  # nothing fetched


# row 16: arguments found late ------------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "words"), [
    (["--session", "processes", "--session-option", "foo=bar"],
     ["session 'processes' got an unexpected keyword argument 'foo'", "it takes max_retries, n_workers"]),
    (["--session", "processes", "--session-option", "n_worker=2"], ["(did you mean 'n_workers'?)"]),
    (["--session", "processes", "--session-option", "n_workers=1e9"],
     ["session 'processes': n_workers must be an integer >= 1, got 1000000000.0"]),
    (["--session", "processes", "--session-option", "n_workers=100000"],
     ["100,000 local workers is more than this machine can run usefully"]),
    (["--session", "dask:1", "--session-option", "n_workers=3"],
     ["session 'dask:1' sets n_workers=1, which the options set differently (n_workers=3); give each option once"]),
    (["--session", "local", "--session-option", "n_workers=2"], ["session 'local'", "it takes no options"]),
    (["--session", "slurm", "--session-option", "queu=normal"], ["'queu' (did you mean 'queue'?)", "walltime"]),
    (["--session", "slurm", "--session-option", "jobs=0"], ["session 'slurm': jobs must be an integer >= 1, got 0"]),
    (["--session", "slurm:2", "--session-option", "resource_spec=select=1:ncpus=4"],
     ["session 'slurm:2' got an unexpected keyword argument 'resource_spec'", "job_mem", "walltime"]),
    (["--session", "pbs", "--session-option", "job_mem=4GB"],
     ["session 'pbs' got an unexpected keyword argument 'job_mem'", "resource_spec", "walltime"]),
    (["--image-shape", "100000x100000"],
     ["shape 100000x100000 is too large: each side may be at most 4,096 pixels", "30.0 GB"]),
])
def test_bad_session_options_and_shapes_exit_2_before_any_work(tmp_path, argv, words):
    data_dir = tmp_path / "data"
    refused(run_here("glyphforge", *FONT_SCENES, *argv, "--data-dir", data_dir), *words)
    assert not data_dir.exists()  # no cache, no work dir, no worker


def test_session_options_are_checked_on_a_cache_hit_too(built_scenes):
    """A cache hit used to return before the options were looked at."""
    before = [entry.key for entry in CacheStore.for_data_dir(built_scenes).ls()]
    result = run_here("glyphforge", *FONT_SCENES, "--session", "processes", "--session-option", "foo=bar",
                      "--data-dir", built_scenes)
    refused(result, "unexpected keyword argument 'foo'")
    spec = ScatteredGlyphs(5, glyphs="font", shard_size=5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        build(spec, session="processes", session_options={"foo": 1}, data_dir=built_scenes, progress=False)
    with pytest.raises(ValueError, match="sets n_workers=1, which the options set differently"):
        build(spec, session="dask:1", session_options={"n_workers": 3}, data_dir=built_scenes, progress=False)
    assert build(spec, data_dir=built_scenes, progress=False).key == before[0]
    assert [entry.key for entry in CacheStore.for_data_dir(built_scenes).ls()] == before


@pytest.mark.parametrize(("argv", "words"), [
    (["omniglot", "--workers", "0"], ["argument --workers: workers must be an integer >= 1, got 0"]),
    (["omniglot", "--workers", "100000"], ["argument --workers: 100,000 local workers is more than"]),
    (["emnist", "--shape", "100000x100000"], ["argument --shape: shape 100000x100000 is too large", "4,096"]),
])
def test_prepare_data_refuses_bad_counts_and_shapes_before_fetching(tmp_path, argv, words):
    data_dir = tmp_path / "data"
    refused(run("prepare-data", *argv, "--data-dir", data_dir, env=OFFLINE), *words)
    assert not data_dir.exists()


@pytest.mark.parametrize(("argv", "words"), [
    (["omniglot", "backgrounds", "--backgrounds", "no_such.jpg"], ["unknown backgrounds 'no_such.jpg'"]),
    (["backgrounds", "omniglot", "--omniglot-sets", "small1", "no_such"], ["unknown Omniglot sets 'no_such'"]),
    (["mnist", "emnist", "--split", "letters", "--split", "no_such"],
     ["argument --split: invalid choice: 'no_such' (choose from 'byclass'"]),
    (["all", "--backgrounds", "water", "no_such"], ["unknown backgrounds 'no_such'"]),
])
def test_every_dataset_s_option_names_are_checked_before_any_dataset_is_prepared(tmp_path, argv, words):
    """Issue 42, row 14: an unknown background after omniglot was refused after 14.6 s of Omniglot work, exit 1."""
    data_dir = tmp_path / "data"
    result = run_here("prepare-data", *argv, "--data-dir", data_dir, "--no-warmup", env=OFFLINE)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert all(word in result.stderr for word in words), result.stderr
    assert not data_dir.exists()

# row 17 (part): the data dir, and a worker's full disk ----------------------------------------------------
@pytest.mark.parametrize(("given", "words"), [
    ("", ["argument --data-dir: the data dir is empty (''), which would mean the current directory"]),
    ("a-file", ["is a file, not a directory: give a directory (it is made if missing)"]),
    ("a-file/below", ["below", "which is a file, not a directory"]),
    ("/proc", ["the data dir /proc is on a system file system that cannot hold files"]),
    ("/proc/glyphforge", ["the data dir /proc/glyphforge is on a system file system that cannot hold files"]),
])
@pytest.mark.parametrize("command", [["glyphforge", "info"], ["prepare-data", "backgrounds", "--offline"]])
def test_an_unusable_data_dir_exits_2_before_anything(tmp_path, given, words, command):
    (tmp_path / "a-file").write_text("not a directory")
    before = sorted(tmp_path.rglob("*"))
    result = run_here(*command, "--data-dir", given, cwd=tmp_path)
    refused(result, *words)
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, not even in the current directory


ENV_FIX = "set $GLYPHFORGE_DATA_DIR to a directory (it is made if missing), or give --data-dir, or unset it"


@pytest.mark.parametrize(("given", "words"), [
    (" ", ["the data dir is empty (' '), which would mean the current directory", ENV_FIX]),
    ("a-file", ["a-file is a file, not a directory", ENV_FIX]),
    ("a-file/below", ["below", "which is a file, not a directory", ENV_FIX]),
    ("/proc/glyphforge", ["the data dir /proc/glyphforge is on a system file system that cannot hold files", ENV_FIX]),
    ("nosuch://bucket/data", ["nosuch://bucket/data: glyphforge does not support nosuch:// URLs", "s3://BUCKET"]),
])
@pytest.mark.parametrize("command", [["glyphforge", "info"], ["prepare-data", "backgrounds", "--offline"]])
def test_an_unusable_data_dir_in_the_environment_exits_2_before_anything(tmp_path, given, words, command):
    """$GLYPHFORGE_DATA_DIR used to skip --data-dir's checks: a file, /proc or ' ' failed late or made a folder."""
    (tmp_path / "a-file").write_text("not a directory")
    before = sorted(tmp_path.rglob("*"))
    result = run_here(*command, cwd=tmp_path, env={"GLYPHFORGE_DATA_DIR": given})
    refused(result, "error: $GLYPHFORGE_DATA_DIR: ", *words)
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, not even in the current directory
    given_too = run_here(*command, "--data-dir", tmp_path / "data", cwd=tmp_path, env={"GLYPHFORGE_DATA_DIR": given})
    assert "GLYPHFORGE_DATA_DIR" not in given_too.stderr  # --data-dir wins: the environment's is not used


@pytest.mark.slow
def test_a_worker_on_a_full_disk_reports_one_paragraph_without_its_traceback(small_disk):  # noqa: F811
    """A shard written by a worker onto a full disk used to print the worker's whole traceback."""
    subprocess.run(["mount", "-o", "remount,size=16k", str(small_disk)], check=True)
    result = run("glyphforge", "build", "scenes", "--glyphs", "font", "--n-examples", "400", "--shard-size", "100",
                 "--image-shape", "64x64", "--background-colours", "navy,red,#203040", "--session", "processes:2",
                 "--data-dir", small_disk / "data")
    assert result.returncode == 1
    error = result.stderr[result.stderr.index("error: "):]
    assert error.startswith("error: shard ") and "of 'scenes' (examples " in error
    assert ": the disk is full (" in error and "(No space left on device). Free space there" in error
    assert "finished shards are kept; run the build again to resume" in error
    assert "Traceback" not in result.stderr and "File \"" not in result.stderr
    assert "(run again with -v for the Python traceback)" in error
    assert CacheStore.for_data_dir(small_disk / "data").ls() == []


# row 19: --emnist-archive --------------------------------------------------------------------------------
def test_an_emnist_archive_that_is_a_directory_is_called_one(tmp_path):
    data_dir = tmp_path / "data"
    result = run_here("prepare-data", "emnist", "--emnist-archive", tmp_path, "--data-dir", data_dir)
    refused(result, f"argument --emnist-archive: {tmp_path} is a directory, not a file: give the path of a copy of "
                    "NIST's gzip.zip itself")
    assert "does not exist" not in result.stderr and not data_dir.exists()


def test_a_missing_emnist_archive_is_refused_also_on_a_cache_hit(prepared_emnist, tmp_path):
    """On a cache hit the archive was never looked at: a typo in its path went unnoticed."""
    missing = tmp_path / "gzip.zip"
    result = run_here("prepare-data", "emnist", "--emnist-archive", missing, "--no-verify",
                      "--data-dir", prepared_emnist)
    refused(result, f"argument --emnist-archive: {missing} does not exist: give the path of a copy of NIST's gzip.zip")


def test_prepare_emnist_calls_a_directory_one_too(tmp_path):
    with pytest.raises(IsADirectoryError, match=rf"^{tmp_path} is a directory, not a file: give the path of a copy "
                                                r"of https://biometrics\.nist\.gov/cs_links/EMNIST/gzip\.zip itself$"):
        prepare_emnist(archives={"gzip.zip": tmp_path}, verify=False, data_dir=tmp_path / "data", progress=False)
    assert not (tmp_path / "data").exists()


# row 20: a copy or a selection with no images -------------------------------------------------------------
def test_an_emnist_copy_without_train_images_is_refused_naming_the_member(emnist_zip, tmp_path):
    names = member_names("byclass")
    empty = replace_members(emnist_zip, tmp_path / "gzip.zip", {
        names["train-images"]: gzip_bytes(idx_header(2051, 0, 28, 28)),
        names["train-labels"]: gzip_bytes(idx_header(2049, 0)),
    })
    data_dir = tmp_path / "data"
    result = run_here("prepare-data", "emnist", "--emnist-archive", empty, "--no-verify", "--no-warmup",
                      "--data-dir", data_dir)
    assert result.returncode == 1
    assert (f"error: {empty}: {names['train-images']} holds no images (its header declares 0), but every EMNIST "
            "split has train images (NIST's byclass has 697,932)") in result.stderr
    assert "Traceback" not in result.stderr and CacheStore.for_data_dir(data_dir).ls() == []


def test_a_selection_of_no_image_raises_instead_of_returning_nothing(prepared_emnist):
    with pytest.raises(ValueError, match=r"no images selected: 4 classes, subset 'train', example_range "
                                         r"\(0\.0, 0\.001\) take none of the images of cache entry emnist "
                                         r"[0-9a-f]{12} \(those classes hold \d+ train and \d+ test images there\)"):
        load_emnist("0123", example_range=(0, 0.001), data_dir=prepared_emnist, download=False)
    x, y, classes = load_emnist("0123", data_dir=prepared_emnist, download=False)
    assert len(x) == len(y) > 0 and list(classes) == list("0123")


# -- issue #42 row 16: paths this system cannot take, named with the limit; an export folder one may not write ----
LONG_NAME = "n" * 300  # over the 255 bytes a name may have (NAME_MAX)
LONG_PATH = "/" + "/".join(["d" * 99] * 42)  # 4,200 characters: over the 4,096 of a path (PATH_MAX)
#: Each command with the path it takes: PATH stands for the path too long (under the test's folder), DATA for a data
#: dir that is fine.
PATH_COMMANDS = {
    "--data-dir": ["glyphforge", "cache", "ls", "--data-dir", "PATH"],
    "info --data-dir": ["glyphforge", "info", "--data-dir", "PATH"],
    "gc --data-dir": ["glyphforge", "cache", "gc", "--data-dir", "PATH"],
    "prepare-data --data-dir": ["prepare-data", "backgrounds", "--offline", "--data-dir", "PATH"],
    "build --data-dir": ["glyphforge", *FONT_SCENES, "--data-dir", "PATH"],
    "--to": ["prepare-data", "backgrounds", "--download-only", "--to", "PATH", "--data-dir", "DATA"],
    "export DIRECTORY": ["glyphforge", "export", "scenes", "PATH", "--data-dir", "DATA"],
    "preview --out": ["glyphforge", "preview", "scenes", "--out", "PATH", "--data-dir", "DATA"],
    "publish URL": ["glyphforge", "publish", "scenes", "file://PATH", "--data-dir", "DATA"],
    "$GLYPHFORGE_DATA_DIR": ["glyphforge", "info"],
}


@pytest.mark.parametrize("too_long", ["name", "path"])
@pytest.mark.parametrize("command", list(PATH_COMMANDS))
def test_a_path_too_long_is_named_with_the_limit_and_exits_2_before_any_work(tmp_path, command, too_long):
    path = str(tmp_path / LONG_NAME / "x") if too_long == "name" else f"{tmp_path}{LONG_PATH}"
    data = tmp_path / "data"
    argv = [arg.replace("PATH", path).replace("DATA", str(data)) for arg in PATH_COMMANDS[command]]
    env = {"GLYPHFORGE_DATA_DIR": path} if command.startswith("$") else None

    result = run_here(*argv, cwd=tmp_path, env=env)

    limit = "more than the 255 a name may have" if too_long == "name" else "more than the 4,095 a path may have here"
    refused(result, "(ENAMETOOLONG)", limit)
    assert "Errno" not in result.stderr and result.stderr.strip().splitlines()[-1].count("error: ") == 1
    [given] = [arg for arg in [*argv, *(env or {}).values()] if path in arg]
    shown = f"'{LONG_NAME[:20]}...{LONG_NAME[-12:]}'" if too_long == "name" else f"{given[:80]}...{given[-60:]}"
    assert shown in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == []  # nothing made


@pytest.mark.parametrize("too_long", ["name", "path"])
@pytest.mark.parametrize("given", ["--mirror", "$GLYPHFORGE_MIRROR", "--mirror file://"])
def test_a_mirror_folder_too_long_is_named_with_the_limit(tmp_path, given, too_long):
    path = str(tmp_path / LONG_NAME) if too_long == "name" else f"{tmp_path}{LONG_PATH}"
    mirror = f"file://{path}" if given.endswith("file://") else path
    argv = ["prepare-data", "backgrounds", "--backgrounds", "water", "--offline", "--data-dir", tmp_path / "data"]
    if given.startswith("--"):
        argv += ["--mirror", mirror]
    result = run_here(*argv, env={"GLYPHFORGE_MIRROR": mirror} if given.startswith("$") else None)
    assert result.returncode == 2 and "Errno" not in result.stderr and "Traceback" not in result.stderr
    limit = "more than the 255 a name may have" if too_long == "name" else "more than the 4,095 a path may have here"
    assert "cannot be read: " in result.stderr and limit in result.stderr
    assert "(ENAMETOOLONG); give a shorter path" in result.stderr


@pytest.mark.slow
def test_a_path_too_long_met_at_work_is_named_with_the_limit_not_raw_errno(built_scenes, tmp_path):
    """A path glyphforge makes under one that is fine (a data dir of 4,000 characters): named, with the limit."""
    deep = tmp_path.joinpath(*["d" * 99] * (4000 // 100))
    result = run("glyphforge", *FONT_SCENES, "--data-dir", deep, "-q")
    assert result.returncode == 1 and "Errno" not in result.stderr and "Traceback" not in result.stderr
    assert "(ENAMETOOLONG). Give a shorter path" in result.stderr and "a path may have here" in result.stderr
# -- issue 42, rows 12 and 13: bad settings exit 2 before any work -----------------------------------------
HUGE = "9" * 400
#: Every size or number setting on the command line or in the environment: ``(arguments, environment)``.
NUMBER_SETTINGS = {
    "cache gc --max-size": lambda value: (["glyphforge", "cache", "gc", "--max-size", value], {}),
    "$GLYPHFORGE_DECODED_BUDGET": lambda value: (["glyphforge", "info"], {"GLYPHFORGE_DECODED_BUDGET": value}),
    "$GLYPHFORGE_CACHE_SIZE": lambda value: (["glyphforge", "info"], {"GLYPHFORGE_CACHE_SIZE": value}),
    "$GLYPHFORGE_LOCK_TIMEOUT": lambda value: (["prepare-data", "backgrounds", "--offline"],
                                               {"GLYPHFORGE_LOCK_TIMEOUT": value}),
}


@pytest.mark.parametrize("value", ["abc", HUGE])
@pytest.mark.parametrize("setting", NUMBER_SETTINGS)
def test_a_size_of_400_digits_exits_2_as_abc_does(setting, value, tmp_path):
    """A size of 400 digits was a raw OverflowError."""
    argv, env = NUMBER_SETTINGS[setting](value)
    result = run_here(*argv, "--data-dir", tmp_path / "data", env=env)
    refused(result, "give the seconds to wait" if "LOCK" in setting else f"{value!r} is not a size")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("value", ["lots", HUGE])
@pytest.mark.parametrize("command", [["export", "scenes", "out"], ["preview", "scenes", "--out", "p.png"]])
def test_a_bad_decoded_budget_exits_2_before_any_work(built_scenes, command, value, tmp_path):
    """$GLYPHFORGE_DECODED_BUDGET=lots with export or preview was exit 1, after the entry was looked up."""
    result = run_here("glyphforge", *command, "--data-dir", built_scenes, cwd=tmp_path,
                      env={"GLYPHFORGE_DECODED_BUDGET": value})
    refused(result, f"error: $GLYPHFORGE_DECODED_BUDGET: {value!r} is not a size")
    assert list(tmp_path.iterdir()) == []


#: Every command taking --mirror (and reading $GLYPHFORGE_MIRROR), with arguments that would do its work.
MIRROR_COMMANDS = {
    "prepare-data": ["prepare-data", "backgrounds", "--offline"],
    "info": ["glyphforge", "info"],
    "export": ["glyphforge", "export", "scenes", "out"],
    "build scenes": ["glyphforge", *FONT_SCENES],
}
BAD_MIRRORS = {"ftp://host/mirror": "does not support ftp:// URLs", "s3://": "names no bucket",
               "s3://Mirror_Bucket/m": "is not a bucket name s3:// takes", "https:///m": "names no host",
               "": "a mirror is blank"}


@pytest.mark.parametrize(("given", "mirror"), [(given, mirror) for given in ("--mirror", "$GLYPHFORGE_MIRROR")
                                               for mirror in BAD_MIRRORS if mirror or given == "--mirror"])
@pytest.mark.parametrize("command", MIRROR_COMMANDS)
def test_an_unsupported_or_malformed_mirror_exits_2_before_any_work(built_scenes, command, given, mirror, tmp_path):
    """A bad --mirror or $GLYPHFORGE_MIRROR was exit 1 once a file was fetched (or taken, never used); an empty
    variable is an unset one."""
    argv = [*MIRROR_COMMANDS[command], "--data-dir", built_scenes]
    result = run_here(*argv, *(["--mirror", mirror] if given == "--mirror" else []), cwd=tmp_path,
                      env={} if given == "--mirror" else {"GLYPHFORGE_MIRROR": mirror})
    where = "argument --mirror: " if given == "--mirror" else "error: $GLYPHFORGE_MIRROR: "
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert where in result.stderr and BAD_MIRRORS[mirror] in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []
