"""Run e2crawfo/dps's own scene loop from a checkout the user made, with its heavy imports stubbed.

glyphforge ships none of dps's code and no script fetching it: the user clones dps with git
(``git clone https://github.com/e2crawfo/dps /tmp/dps``) and passes the checkout. This
module imports the checkout's ``dps/datasets/base.py`` unchanged, after putting stand-ins
into `sys.modules` for what it imports and this benchmark cannot (or need not) satisfy:

* ``tensorflow`` (and ``tensorflow.python.util.deprecation``): only dps's TFRecord writer
  and reader use it; the writer is replaced (below), the reader is never called.
* ``matplotlib`` (``matplotlib.colors`` for colour names, read once per ``_make``; pyplot
  only for dps's visualisations), when not installed: names resolved by Pillow's table.
* ``dill`` (dps's artifact pickles, never called here), when not installed.
* ``dps`` and ``dps.utils`` (whose real ``__init__`` imports scikit-image, pandas, IPython,
  clify and more): ``cfg``, ``init`` and the utilities ``base.py`` names. ``Param`` /
  ``Parameterized`` are a minimal resolver (a keyword, else the declared default);
  ``resize_image`` raises, since dps only resizes when ``patch_shape_dist`` is set, which
  these specs leave off.
* ``dps.datasets.load``: ``load_emnist`` returns the arrays the benchmark hands it (the
  glyph images glyphforge draws from, at the spec's glyph shape), so both tools draw the
  same objects at the same sizes; backgrounds are not used (black scenes).
* ``dps.datasets.parallel_worker``: dps's multiprocessing builder, not used.
* ``numpy.product``, removed in numpy 2, which a dps class body names: ``numpy.prod``.

What runs is dps's ``PatchesDataset._make`` as written: per example, per frame and per
object in Python (rejection placement, ``_colourize``, alpha compositing, the visibility
states, ``Rectangle.update`` bouncing, ``_get_annotations``), for
``EmnistObjectDetectionDataset``. Each finished example goes to a list instead of dps's
TFRecord writer (``_write_single_example``): serialising is left out, which favours dps.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

_NOT_GIVEN = object()


class _Param:
    """Stand-in for ``dps.utils.Param``: a declared parameter with an optional default."""

    def __init__(self, default: Any = _NOT_GIVEN, aliases: Any = None, help: str = "", type: Any = None) -> None:
        self.default = default


class _Parameterized:
    """Stand-in for ``dps.utils.Parameterized``: each ``_Param`` class attribute becomes an instance
    attribute, from the constructor's keywords, else its default."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        obj = super().__new__(cls)
        for name in dir(cls):
            declared = getattr(cls, name, None)
            if not isinstance(declared, _Param):
                continue
            value = kwargs.get(name, declared.default)
            if value is _NOT_GIVEN:
                raise AttributeError(f"dps parameter {name!r} of {cls.__name__} needs a value")
            setattr(obj, name, value)
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


def _unused(name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"the benchmark's stand-in for dps's {name} is not meant to be called")

    return call


def _module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


def _colour_table() -> types.ModuleType:
    from PIL import ImageColor

    def to_rgb(colour: Any) -> tuple[float, ...]:
        if isinstance(colour, str):
            return tuple(value / 255 for value in ImageColor.getrgb(colour)[:3])
        return tuple(float(value) for value in colour[:3])

    names = {name: name for name in ImageColor.colormap}
    return _module("matplotlib.colors", to_rgb=to_rgb, get_named_colors_mapping=lambda: names)


class _Emnist:
    """What the stand-in ``load_emnist`` returns: set by `DpsReference` before each ``_make``."""

    images: np.ndarray = np.zeros((0, 1, 1), np.uint8)
    labels: np.ndarray = np.zeros(0, np.int64)
    classes: list[str] = []

    @classmethod
    def load(cls, classes: Any, balance: bool = False, shape: Any = None, **_: Any) -> tuple[Any, ...]:
        if shape is not None and tuple(shape) != cls.images.shape[1:]:
            raise ValueError(f"the benchmark handed dps glyphs of {cls.images.shape[1:]}, dps asked for {shape}")
        return cls.images, cls.labels, list(cls.classes)


def _stub_modules(checkout: Path) -> None:
    """Put the stand-ins into `sys.modules` (see the module docstring)."""
    colors = _colour_table()
    pyplot = _module("matplotlib.pyplot", show=_unused("pyplot"), subplots=_unused("pyplot"))
    deprecation = _module("tensorflow.python.util.deprecation", _PRINT_DEPRECATION_WARNINGS=True)
    util = _module("tensorflow.python.util", deprecation=deprecation)
    tf_python = _module("tensorflow.python", util=util)
    tensorflow = _module("tensorflow", python=tf_python)
    cfg = types.SimpleNamespace(data_dir="/nonexistent", copy_dataset_to=None, get=lambda key, default=None: default)
    utils = _module(
        "dps.utils", Param=_Param, Parameterized=_Parameterized, NumpySeed=_unused("NumpySeed"),
        get_param_hash=_unused("get_param_hash"), animate=_unused("animate"), gen_seed=_unused("gen_seed"),
        resize_image=_unused("resize_image (patch_shape_dist)"), atleast_nd=_unused("atleast_nd"),
        pformat=repr, map_structure=_unused("map_structure"), HashableDist=_unused("HashableDist"),
        Config=dict,
    )
    dps = _module("dps", cfg=cfg, init=lambda config=None: cfg, utils=utils, __path__=[str(checkout / "dps")])
    datasets = _module("dps.datasets", __path__=[str(checkout / "dps" / "datasets")])
    load = _module(
        "dps.datasets.load", load_emnist=_Emnist.load, load_backgrounds=_unused("load_backgrounds"),
        background_names=lambda: [], hard_background_names=lambda: [],
    )
    worker = _module("dps.datasets.parallel_worker", build_dataset=_unused("build_dataset"))
    optional = {  # stood in for only when not installed: glyphforge itself uses dill (its sessions)
        "matplotlib": _module("matplotlib", colors=colors, pyplot=pyplot, patches=_module("matplotlib.patches")),
        "matplotlib.colors": colors, "matplotlib.pyplot": pyplot,
        "dill": _module("dill", dump=_unused("dill.dump"), load=_unused("dill.load"), HIGHEST_PROTOCOL=4),
    }
    installed = {name: importlib.util.find_spec(name) is not None for name in ("matplotlib", "dill")}
    for name, module in optional.items():
        if not installed[name.partition(".")[0]]:
            sys.modules[name] = module
    sys.modules.update({
        "tensorflow": tensorflow, "tensorflow.python": tf_python, "tensorflow.python.util": util,
        "tensorflow.python.util.deprecation": deprecation,
        "dps": dps, "dps.utils": utils, "dps.datasets": datasets, "dps.datasets.load": load,
        "dps.datasets.parallel_worker": worker,
    })


def load_dps_base(checkout: Path) -> types.ModuleType:
    """Import ``dps/datasets/base.py`` of ``checkout`` (unchanged) with the stand-ins in place."""
    path = checkout / "dps" / "datasets" / "base.py"
    if not path.is_file():
        raise SystemExit(
            f"--dps {checkout}: no dps/datasets/base.py there; clone dps first, e.g. "
            "git clone https://github.com/e2crawfo/dps /tmp/dps"
        )
    if "dps.datasets.base" in sys.modules:
        return sys.modules["dps.datasets.base"]
    _stub_modules(checkout)
    if not hasattr(np, "product"):  # numpy 2 removed the alias dps's class bodies name (`reductions_dict`)
        np.product = np.prod  # type: ignore[attr-defined]
    spec = importlib.util.spec_from_file_location("dps.datasets.base", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["dps.datasets.base"] = module
    spec.loader.exec_module(module)
    return module


class DpsReference:
    """dps's ``EmnistObjectDetectionDataset`` loop over given glyph images.

    Parameters
    ----------
    checkout
        A git checkout of e2crawfo/dps.
    images, labels, classes
        The glyph images (uint8 ``(N, h, w)``, already at the spec's glyph shape), each one's
        class index, and the class names: what dps's ``load_emnist`` returns.
    params
        dps's parameters (``image_shape``, ``min_chars``, ``max_chars``, ``patch_shape``,
        ``max_overlap`` in pixels of area, ``n_frames``, ``patch_speed``, ...).
    """

    def __init__(self, checkout: Path, images: np.ndarray, labels: np.ndarray, classes: Sequence[str],
                 **params: Any) -> None:
        self.base = load_dps_base(checkout)
        self.images, self.labels, self.classes = images, labels, list(classes)
        self.params = params

    def make(self, n: int, seed: int = 0) -> list[dict[str, Any]]:
        """Run dps's ``_make`` for ``n`` examples (its progress prints silenced); return what it would have
        written, one dict per example."""
        _Emnist.images, _Emnist.labels, _Emnist.classes = self.images, self.labels, self.classes
        dataset = self.base.EmnistObjectDetectionDataset.__new__(
            self.base.EmnistObjectDetectionDataset, n_examples=n, characters=self.classes, **self.params
        )
        written: list[dict[str, Any]] = []
        dataset._write_single_example = lambda **example: written.append(example)
        state = np.random.get_state()
        np.random.seed(seed)  # as dps's NumpySeed around _make
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                dataset._make()
        finally:
            np.random.set_state(state)
        if len(written) != n:
            raise RuntimeError(f"dps wrote {len(written)} examples, not {n}")
        return written
