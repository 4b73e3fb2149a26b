"""The walks of issue #44: how many glyphforge modules three common calls pass through (`support.walks`).

Each goal bounds the stops (module crossings), the climbs (calls from a lower layer up) or both,
so a call that starts going back and forth between modules again fails here with its route. Each
call is walked warm: the same call made once before, so imports are not counted.

The issue's figures came from a reading of the code (``farm-studio walk``, not available here);
these walks are traced, so they count every crossing a run makes. The goals keep the issue's
ratios where the two counts differ: a build into a URL walked 169 stops and 3 climbs here before
the redesign (35 and 9 read), ``find_built`` at a URL 71 (21 read), ``ds[i]`` 26 (24 read).
"""
from __future__ import annotations

from pathlib import Path

import pytest

import glyphforge as gf

from support.specs import NoiseSpec
from support.walks import walking


def _built_into_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, NoiseSpec]:
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(tmp_path / "local"))  # a URL data dir's local cache
    url = (tmp_path / "data").as_uri()
    return url, NoiseSpec(n_examples=20, shard_size=10, kind="test-walk")


@pytest.mark.xfail(strict=True, reason="#44: 169 stops and 3 climbs before the redesign")
def test_a_build_into_a_url_takes_at_most_96_stops_and_1_climb(tmp_path, monkeypatch):
    url, spec = _built_into_url(tmp_path, monkeypatch)
    gf.build(NoiseSpec(n_examples=20, shard_size=10, kind="test-warm"), data_dir=url, session="local",
             progress=False)
    with walking() as walk:
        gf.build(spec, data_dir=url, session="local", progress=False)
    assert walk.stops <= 96 and walk.climbs <= 1, walk.route()


def test_a_row_through_the_decoded_copy_takes_at_most_12_stops(tmp_path):
    ds = gf.build(NoiseSpec(n_examples=20, shard_size=10, kind="test-walk"), data_dir=tmp_path, session="local",
                  progress=False)
    ds.materialize()
    gf.open_built(ds.path)[2]
    ds = gf.open_built(ds.path)  # its copy opened by its first row, as a fresh process's would be
    with walking() as walk:
        ds[3]
    assert walk.stops <= 12, walk.route()


@pytest.mark.xfail(strict=True, reason="#44: 71 stops before the redesign")
def test_finding_a_built_kind_at_a_url_takes_at_most_40_stops(tmp_path, monkeypatch):
    url, spec = _built_into_url(tmp_path, monkeypatch)
    gf.build(spec, data_dir=url, session="local", progress=False)
    gf.find_built("test-walk", data_dir=url)
    with walking() as walk:
        gf.find_built("test-walk", data_dir=url)
    assert walk.stops <= 40, walk.route()
