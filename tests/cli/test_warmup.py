"""Cold start: `glyphforge warmup`, the numba cache of a read-only install, and one compile per machine.

Each test runs fresh processes with an empty numba cache, so each compiles for real
(several seconds): they are marked slow. Evidence of compiling or not is numba's own
cache counters (``dispatcher.stats.cache_hits`` / ``cache_misses``), never timings.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import glyphforge

pytestmark = pytest.mark.slow

#: Prints, as JSON, how each kernel of glyphforge got its machine code in this process.
COUNTERS = textwrap.dedent("""
    import json, numba
    from glyphforge.pipelines import composite, resample_kernel

    def counters():
        kernels = {"resample": resample_kernel.resample, "composite": composite.composite,
                   "place_glyphs": composite.place_glyphs, "ink_boxes": composite.ink_boxes}
        return {name: {"hits": sum(kernel.stats.cache_hits.values()), "misses": sum(kernel.stats.cache_misses.values())}
                for name, kernel in kernels.items()}
""")


def run_python(code: str, env: dict[str, str], *options: str) -> dict:
    result = subprocess.run([sys.executable, *options, "-c", code], capture_output=True, text=True, timeout=600,
                            env={**os.environ, **env}, cwd=env.get("HOME"))  # not the checkout: '' leads sys.path
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def index_files(cache: Path) -> set[str]:
    """The kernels numba keeps compiled code for in ``cache`` (one index file each)."""
    return {index.name.split("-")[0] for index in cache.rglob("*.nbi")}


ALL_KERNELS = {"resample_kernel.resample", "composite.ink_boxes", "composite.place_glyphs", "composite.composite"}
WARMUP = COUNTERS + "from glyphforge.warmup import warmup\nwarmup()\nprint(json.dumps(counters()))"
NOTHING = {"hits": 0, "misses": 0}


def test_warmups_started_together_take_turns_compile_once_and_a_later_run_only_loads(tmp_path):
    """One cold compile serves every check: two warmups at once, then the command in a third process."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    together = [subprocess.Popen([sys.executable, "-c", WARMUP], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env={**os.environ, **env}, cwd=tmp_path) for _ in range(2)]
    reports = []
    for process in together:
        output, errors = process.communicate(timeout=600)
        assert process.returncode == 0, errors
        reports.append(json.loads(output.strip().splitlines()[-1]))
    compiled = [report for report in reports if report["resample"]["misses"]]
    loaded = [report for report in reports if not report["resample"]["misses"]]
    assert len(compiled) == len(loaded) == 1, reports  # the second waited for the first, then loaded everything
    # the first compiled resize once per kind of call (uint8 Pillow, uint8 area, float32) ...
    scenes = NOTHING if (os.cpu_count() or 1) > 1 else {"hits": 0, "misses": 1}
    assert compiled[0] == {"resample": {"hits": 0, "misses": 3}, "composite": scenes, "place_glyphs": scenes,
                           "ink_boxes": scenes}
    # ... while a second process of its own compiled the scene kernels (on more than one CPU), into the same cache
    assert index_files(tmp_path / "numba") == ALL_KERNELS
    assert len(list((tmp_path / "numba").rglob("glyphforge-warm-*"))) == 1  # the marker: done on this machine
    all_loaded = {"resample": {"hits": 3, "misses": 0}, "composite": {"hits": 1, "misses": 0},
                  "place_glyphs": {"hits": 1, "misses": 0}, "ink_boxes": {"hits": 1, "misses": 0}}
    assert loaded[0] == all_loaded
    # later, `glyphforge warmup` (its entry point, in a fresh process) says where the kernels are and only loads them
    command = COUNTERS + "from glyphforge.cli import main\nassert main(['warmup']) == 0\nprint(json.dumps(counters()))"
    later = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, env={**os.environ, **env},
                           cwd=tmp_path, timeout=600)
    assert later.returncode == 0, later.stderr
    assert "resize uint8 area" in later.stdout
    assert f"compiled kernels are kept in {tmp_path / 'numba'}" in later.stdout
    assert json.loads(later.stdout.strip().splitlines()[-1]) == all_loaded


def test_prepare_data_compiles_every_kernel_at_its_end_unless_told_not_to_here_if_its_second_process_fails(
        shared_data, tmp_path):
    (tmp_path / "hooks").mkdir()  # every Python started with this on its path runs it first
    (tmp_path / "hooks" / "sitecustomize.py").write_text(
        "import os\n"
        "if os.environ.get('FAIL_HERE') == 'children':  # this process starts; the processes it starts fail\n"
        "    os.environ['FAIL_HERE'] = '1'\n"
        "elif os.environ.get('FAIL_HERE'):\n"
        "    raise SystemExit('injected start-up failure')\n")

    def prepare(*options: str, env: dict[str, str] | None = None) -> tuple[str, set[str]]:
        result = subprocess.run(
            [str(Path(sys.executable).parent / "prepare-data"), "backgrounds", "--backgrounds", "water",
             "--mirror", shared_data.as_uri(), "--offline", "--data-dir", str(tmp_path / "data"), *options],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), **(env or {})})
        assert result.returncode == 0, result.stderr
        return result.stderr, index_files(tmp_path / "numba")

    log, kernels = prepare("--no-warmup")  # backgrounds at native size use no kernel
    assert kernels == set() and "numba kernels ready" not in log
    hooks = os.pathsep.join(filter(None, [str(tmp_path / "hooks"), os.environ.get("PYTHONPATH")]))
    log, kernels = prepare(env={"FAIL_HERE": "children", "PYTHONPATH": hooks})  # a cache hit for the data; the
    assert kernels == ALL_KERNELS  # kernels are compiled all the same ...
    assert "numba kernels ready in" in log
    if (os.cpu_count() or 1) > 1:  # ... all in prepare-data's own process: the only other one died at its start
        failed = "warmup: the second process failed (exit 1: SystemExit: injected start-up failure)"
        assert f"{failed}; compiling its kernels here" in log


def test_a_read_only_install_keeps_its_compiled_kernels_in_the_user_cache_dir(tmp_path):
    package = Path(glyphforge.__file__).parent
    install = tmp_path / "site"
    shutil.copytree(package, install / "glyphforge", ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(install), str(install)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"a read-only bind mount is not allowed here: {mounted.stderr.decode().strip()}")
    try:
        assert not os.access(install / "glyphforge" / "pipelines", os.W_OK) or _read_only(install)
        # -S: no site hooks, so this checkout's editable-install finder cannot shadow the read-only copy;
        # the dependencies come from site-packages on the path after it.
        (tmp_path / "home").mkdir()
        env = {"PYTHONPATH": os.pathsep.join([str(install), sysconfig.get_paths()["purelib"]]),
               "XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home"),
               "GLYPHFORGE_DATA_DIR": str(tmp_path / "data"), "NUMBA_CACHE_DIR": ""}
        code = COUNTERS + textwrap.dedent("""
            import glyphforge, numpy as np
            from glyphforge.pipelines.resize import resize
            assert glyphforge.__file__.startswith(INSTALL), glyphforge.__file__
            resize(np.zeros((1, 8, 8), np.uint8), (4, 4))
            print(json.dumps({**counters()["resample"], "cache_dir": numba.config.CACHE_DIR}))
        """).replace("INSTALL", repr(str(install)))
        first = run_python(code, env, "-S")
        assert first["misses"] == 1 and first["cache_dir"] == str(tmp_path / "xdg" / "glyphforge" / "numba")
        second = run_python(code, env, "-S")
        assert second["misses"] == 0 and second["hits"] == 1  # loaded, not compiled again
    finally:
        subprocess.run(["umount", str(install)], check=False)


def _read_only(folder: Path) -> bool:
    try:
        (folder / "probe").touch()
    except OSError:
        return True
    (folder / "probe").unlink()
    return False


def test_the_workers_of_a_processes_session_load_what_the_driver_compiled(tmp_path):
    code = textwrap.dedent("""
        import json, sys
        sys.path.insert(0, TESTS)
        from glyphforge.builds import build
        from support.counting_scenes import CountingScenes, kernel_compiles

        if __name__ == "__main__":
            spec = CountingScenes(40, glyphs="font", characters="AB", background_colours=["navy"], shard_size=10)
            dataset = build(spec, session="processes:2", progress=False)
            print(json.dumps({"per_shard": dataset["worker_compiles"][::10].tolist(), "driver": kernel_compiles()}))
    """).replace("TESTS", repr(str(Path(__file__).parents[1])))
    script = tmp_path / "build_once_compiled.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["driver"] == 3  # the driver compiled each scene kernel once (in ScatteredGlyphs.prepare; font
    # glyphs are resized by Pillow, so no resize kernel) ...
    assert report["per_shard"] == [0, 0, 0, 0]  # ... and no worker compiled anything: they loaded it
