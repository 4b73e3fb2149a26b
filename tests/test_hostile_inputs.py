"""Runaway and wrong inputs to builds and commands: refused before any work, with exit status 2 and no resume advice."""
from __future__ import annotations

import errno
import logging
import os
import subprocess
import time
from pathlib import Path

import pytest

from glyphforge import cli
from glyphforge._files import atomic_path, writing
from glyphforge.builds import build
from glyphforge.builds.making.spec import SpecError
from glyphforge.cache import dump_pklz
from glyphforge.cache.declared import MAX_SHARDS
from glyphforge.errors import StorageError
from glyphforge.scenes.spec import ScatteredGlyphs

from support.cli import BIN
from support.specs import NoiseSpec


def glyphforge_command(*argv: str | Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the installed ``glyphforge`` offline; return the process and its seconds."""
    started = time.perf_counter()
    result = subprocess.run([str(BIN / "glyphforge"), *map(str, argv)], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "GLYPHFORGE_OFFLINE": "1"})
    return result, time.perf_counter() - started


@pytest.mark.parametrize("session", ["local", "bogus"])
def test_an_absurd_example_count_is_refused_at_once(tmp_path, session):
    """Row 12: 10^12 scenes used to hang listing a record per shard before anything else."""
    result, seconds = glyphforge_command("build", "scenes", "--glyphs", "font", "--n-examples", "1000000000000",
                                         "--session", session, "--data-dir", tmp_path)
    assert result.returncode == 2 and seconds < 30
    if session == "bogus":
        assert "error: unknown session 'bogus'; use one of: local, processes[:N_WORKERS]" in result.stderr
    else:
        assert ("error: 1,000,000,000,000 examples in shards of 1,000 make 1,000,000,000 shards, more than the "
                f"{MAX_SHARDS:,} a build may have: raise shard_size to at least 1,000,000") in result.stderr
    assert "Traceback" not in result.stderr and "resume" not in result.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.json"))


def test_too_many_shards_is_a_spec_error_in_python_too(tmp_path):
    with pytest.raises(SpecError, match="make 2,000,000 shards, more than the 1,000,000"):
        build(NoiseSpec(n_examples=2_000_000, shard_size=1), data_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"shard_size must be an integer >= 1 and <= 100000, got 1000000"):
        ScatteredGlyphs(10, glyphs="font", shard_size=1_000_000)


def test_an_absurd_worker_count_is_refused_and_workers_never_outnumber_the_shards(tmp_path, caplog):
    """Row 13: processes:999999 used to start 193 processes and 3.9 GB in 15 s, still spawning."""
    result, seconds = glyphforge_command("build", "scenes", "--glyphs", "font", "--n-examples", "10",
                                         "--session", "processes:999999", "--data-dir", tmp_path)
    assert result.returncode == 2 and seconds < 30
    assert ("session 'processes:999999': 999,999 local workers is more than this machine can run usefully "
            "(8 per CPU, at least 64") in result.stderr
    with caplog.at_level(logging.INFO, logger="glyphforge"):
        dataset = build(NoiseSpec(n_examples=3, shard_size=1), session="processes:8", data_dir=tmp_path,
                        progress=False)
    assert len(dataset) == 3
    assert "starting 3 workers, not 8: only 3 shards to make" in caplog.text


@pytest.mark.parametrize(("argv", "message"), [
    (["--characters", "01Ω"], "scenes spec: unknown emnist classes ['Ω'] (the default options): the known ones are "
                              "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"),
    (["--glyph-option", "split=letters", "--characters", "A1"],
     "scenes spec: unknown emnist classes ['1'] (split='letters'): the known ones are ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    (["--glyphs", "font", "--backgrounds", "water,lava"], "scenes spec: unknown backgrounds 'lava': the known ones"),
    (["--glyphs", "font", "--colours", "chartreuse-ish"], "colours has 'chartreuse-ish', which is not a colour"),
])
def test_unknown_classes_and_names_fail_on_the_driver_with_exit_status_2(tmp_path, argv, message):
    """Row 14: they used to fail inside a worker, with a traceback and 'run the build again to resume'."""
    result, _ = glyphforge_command("build", "scenes", "--n-examples", "10", *argv, "--session", "processes:2",
                                   "--data-dir", tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"error: {message}" in result.stderr
    assert "Traceback" not in result.stderr and "resume" not in result.stderr and "-v" not in result.stderr
    assert not (tmp_path / "raw").exists()  # nothing was fetched before the names were checked


def test_preview_counts_must_be_positive(tmp_path):
    """Row 18: -n -3 said 'negative dimensions are not allowed', -n 0 'classes is empty'."""
    for bad in ("-3", "0"):
        result, _ = glyphforge_command("preview", "scenes", "-n", bad, "--data-dir", tmp_path)
        assert result.returncode == 2
        assert f"argument -n: give a positive integer, e.g. 16; got '{bad}'" in result.stderr


def test_a_full_disk_names_the_path_the_free_space_and_what_to_do(tmp_path):
    """Row 10: ENOSPC used to print '[Errno 28] No space left on device' with no path or advice."""
    with pytest.raises(StorageError) as caught, writing(tmp_path / "cache" / "x.pklz"):
        raise OSError(errno.ENOSPC, "No space left on device")
    message = str(caught.value)
    assert message.startswith(f"cannot write {tmp_path / 'cache' / 'x.pklz'}: the disk is full (")
    assert "MB free there) (No space left on device). Free space there, or give a data dir on a larger disk " \
           "(--data-dir or $GLYPHFORGE_DATA_DIR), and run again: finished work is kept and resumed" in message
    assert caught.value.errno == errno.ENOSPC
    with pytest.raises(OSError, match="unrelated") as other, writing(tmp_path):
        raise OSError(errno.EIO, "unrelated")
    assert not isinstance(other.value, StorageError)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_real_full_tmpfs_leaves_no_partial_file(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("this sandbox does not allow mounting a tmpfs")
    try:
        with pytest.raises(StorageError, match=r"cannot write .*big\.pklz: the disk is full \(\d\.\d MB free there\)"):
            dump_pklz(os.urandom(4 << 20), mount / "big.pklz", level=0)
        assert list(mount.iterdir()) == []  # neither big.pklz nor its temporary file
        with pytest.raises(StorageError), atomic_path(mount / "x") as temporary:
            temporary.write_bytes(os.urandom(2 << 20))
        assert list(mount.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_the_command_line_shows_glyphforge_log_lines_unless_quiet(tmp_path, capsys):
    """Row 15 (the CLI's part): INFO lines of glyphforge's loggers reach stderr at normal verbosity."""
    def action(args) -> int:
        logging.getLogger("glyphforge.pipelines.download").info("503 from http://x/y, retry 2/5 in 4 s")
        return 0

    for quiet, shown in ((False, True), (True, False)):
        args = cli._glyphforge_parser().parse_args(["info", *(["-q"] if quiet else [])])
        assert cli.common.run(action, args) == 0
        assert ("503 from http://x/y, retry 2/5 in 4 s" in capsys.readouterr().err) is shown
    assert not logging.getLogger("glyphforge").handlers  # nothing left behind in this process
