"""Below the public entry points only ``context=`` travels (issue 31, "Configuration").

A public function (a name in ``glyphforge.__all__``, what it is bound from, or a method of a public class)
may take the loose configuration keywords (``data_dir=``, ``mirrors=``, ``offline=``, ...): it turns them
into one `~glyphforge.context.DataContext` (`DataContext.resolve`, or `glyphforge.context.as_context` for
a context-or-path argument) and passes only that context below. These tests read every module of the
layers above the context (see tests/test_layers.py) and fail when a function that is not public takes
one of those keywords, or when a call hands one on to anything but a resolver or a public function, or when
a public function takes a data dir but no ``context=``. The few exceptions are documented protocol
contracts, listed with their reason.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import glyphforge

PACKAGE_DIR = Path(glyphforge.__file__).parent

#: The packages and top-level modules above the context layer (tests/test_layers.py's LAYERS).
ABOVE_CONTEXT = ("datasets", "loaders", "builds", "scenes", "previews", "warmup", "cli")

#: The keywords of a data dir and its fetching that a `DataContext` holds (``progress`` is left out: see
#: the note in `test_no_function_below_the_public_ones_takes_loose_configuration`).
LOOSE = frozenset({"data_dir", "mirrors", "offline", "verify", "download", "cache_dir", "storage_options"})

#: The calls that turn loose keywords into a context (``replace``: `dataclasses.replace` of one).
RESOLVERS = frozenset({"resolve", "as_context", "replace"})

#: Callees that are handed a context's fields by design, each with its reason (public functions, which
#: resolve what they are given, are allowed too).
RECEIVERS: dict[str, str] = {
    "publish_entry": "storage layer, below the context: the publish target's storage options",
    "fetch_all": "pipelines layer, below the context: fetch's own mirrors and offline, for several files at once",
    "call_with_data_dir": "spec protocol: make_shard(..., data_dir=str)",
    "method": "spec protocol: make_shard(..., data_dir=str), in call_with_data_dir",
    "make_shard": "spec protocol: ScatteredGlyphs.prepare makes one scene as a worker would",
    "open_remote": "open_built's reader cache dir (the one-Entry work owns builds/reading/remote_shards.py)",
}

#: ``module:qualname`` of non-public functions allowed loose keywords, each a documented protocol contract.
CONTRACTS: dict[str, str] = {
    # The spec protocol (glyphforge.builds.making.spec): a spec's make_shard / metadata may take ``data_dir: str``,
    # and the picklable shard tasks carry it to the workers.
    "glyphforge.builds.making.shards:call_with_data_dir": "spec protocol: make_shard(..., data_dir=str)",
    "glyphforge.builds.making.shards:make_shard_arrays": "spec protocol: make_shard(..., data_dir=str)",
    "glyphforge.builds.making.shards:ShardTask.__init__": "spec protocol: the worker task carries data_dir: str",
    "glyphforge.builds.making.url_build:RemoteShardTask.__init__": (
        "worker task into a URL data dir: its Location and the worker's local cache dir travel pickled"),
    # The machinery of the per-class datasets (glyphforge.datasets.classes.files), whose signature is the public
    # one of a dataset declared at run time (its load_* and prepare_* are these, bound by `bind`).
    "glyphforge.datasets.classes.load:load": "per-class load, the public load_* of a run-time declaration",
    "glyphforge.datasets.classes.prepare:prepare": "per-class prepare, the public prepare_* of a run-time declaration",
    # The glyph source of scenes (glyphforge.scenes.glyph_datasets, `(classes, *, example_range, shape,
    # context)`), also called by users with ``data_dir=``: each resolves it once.
    "glyphforge.datasets.classes.load:glyph_images": "scenes' glyph source, resolves data_dir once",
    "glyphforge.datasets.omniglot.dataset:glyph_images": "scenes' glyph source, resolves data_dir once",
    "glyphforge.datasets.emnist:glyph_images": "scenes' glyph source, resolves data_dir once",
    "glyphforge.datasets.mnist:mnist_glyph_images": "scenes' glyph source, resolves data_dir once",
    "glyphforge.datasets.fashion_mnist:fashion_mnist_glyph_images": "scenes' glyph source, resolves data_dir once",
    "glyphforge.datasets.kmnist:kmnist_glyph_images": "scenes' glyph source, resolves data_dir once",
    # A scene shard's scenes before they are cut into crops: make_shard's data_dir, handed on (the spec protocol).
    "glyphforge.scenes.spec:ScatteredGlyphs._scenes": "spec protocol: make_shard's data_dir, before crops",
    # torchvision's root and glyphforge's data_dir, one of which a constructor takes: resolved into one before the
    # context is made.
    "glyphforge.datasets.torchvision_args:data_dir_of": "torchvision's root or data_dir, before the context",
    # The library function of `glyphforge preview` (its --data-dir), which resolves it once.
    "glyphforge.previews:preview_target": "the preview command's library function, resolves data_dir once",
    # Owned by issue 31's "one Entry" work (builds/reading/remote_shards.py): open_built's cache_dir, handed on as is.
    "glyphforge.builds.reading.remote_shards:open_remote": "open_built's reader cache dir (the one-Entry work owns it)",
}


def _modules() -> Iterator[ModuleType]:
    for info in pkgutil.walk_packages(glyphforge.__path__, "glyphforge."):
        if info.name.split(".")[1] in ABOVE_CONTEXT:
            yield importlib.import_module(info.name)


def _functions(module: ModuleType) -> Iterator[tuple[str, Callable[..., Any]]]:
    """``(qualname, function)`` of the module's functions (lru-cached ones unwrapped) and its classes' methods."""
    for name, value in vars(module).items():
        if getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(value):
            for attribute, member in vars(value).items():
                member = getattr(member, "__func__", member)  # classmethod, staticmethod
                member = getattr(member, "fget", member)  # property
                if inspect.isfunction(member):
                    yield f"{name}.{attribute}", member
        elif callable(value) and inspect.isfunction(inspect.unwrap(value)):
            yield name, value


def _public() -> set[int]:
    """The ids of the public functions: ``glyphforge.NAME``, what each is bound from, and public classes' methods."""
    found: list[Any] = []
    for name in glyphforge.__all__:
        value = getattr(glyphforge, name)
        if inspect.isclass(value):
            for kind in value.__mro__:
                found += [getattr(member, "__func__", member) for attribute, member in vars(kind).items()
                          if not attribute.startswith("_") or attribute == "__init__"]
        else:
            found.append(value)
    ids = set()
    for value in found:
        while value is not None:
            ids.add(id(value))
            value = getattr(value, "__wrapped__", None)
    return ids


def _loose_takers() -> list[str]:
    public = _public()
    found = []
    for module in _modules():
        for qualname, function in _functions(module):
            taken = LOOSE & set(inspect.signature(function).parameters)
            where = f"{module.__name__}:{qualname}"
            if taken and id(function) not in public and where not in CONTRACTS:
                found.append(f"{where} takes {', '.join(sorted(taken))}")
    return sorted(found)


def _handed_on(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """``file:line callee(keyword=...)`` for each call handing a loose keyword to anything but a resolver, a
    public function or a listed receiver."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        relative = path.relative_to(package_dir)
        if relative.parts[0].removesuffix(".py") not in ABOVE_CONTEXT:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "?")
            handed = sorted(keyword.arg for keyword in node.keywords if keyword.arg in LOOSE)
            if handed and callee not in RESOLVERS | RECEIVERS.keys() | set(glyphforge.__all__):
                found.append(f"{relative}:{node.lineno} {callee}({', '.join(handed)}=...)")
    return found


def test_no_function_below_the_public_ones_takes_loose_configuration() -> None:
    # ``progress`` is not checked: below the public functions it is the one flag a writer, a format reader or a
    # build's fan-out hands its own progress bar (a build's ``progress`` also shows its shard bar, which the
    # context's ``progress`` does not say).
    assert _loose_takers() == [], "take context: DataContext instead (resolve the keywords in the public function)"


def _without_context() -> list[str]:
    """The public functions above the context that take a data dir (``data_dir=``) but not ``context=`` (a spec's
    methods aside: the spec protocol's ``make_shard(..., data_dir=str)`` and ``metadata(data_dir=str)``)."""
    public = _public()
    found = []
    for module in _modules():
        for qualname, function in _functions(module):
            parameters = inspect.signature(function).parameters
            if id(function) in public and "data_dir" in parameters and "context" not in parameters \
                    and not qualname.startswith("ScatteredGlyphs."):
                found.append(f"{module.__name__}:{qualname}")
    return sorted(found)


def test_every_public_function_taking_a_data_dir_takes_a_context() -> None:
    assert _without_context() == [], "take context: DataContext | None too, and resolve it with the loose keywords"


def test_only_the_resolvers_receive_loose_keywords() -> None:
    assert _handed_on() == [], "hand on the context, not its fields (or resolve them with DataContext.resolve)"


def test_a_helper_handed_a_loose_keyword_is_found(tmp_path: Path) -> None:
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "toy.py").write_text(
        "def load_toy(data_dir=None, offline=None, context=None):\n"
        "    context = DataContext.resolve(context, data_dir=data_dir)\n"
        "    _read(context, offline=offline)\n"
        "    return load_mnist(data_dir=data_dir)\n"
    )
    (tmp_path / "pipelines.py").write_text("fetch_here(mirrors=())\n")  # below the context: not read
    assert _handed_on(tmp_path) == ["datasets/toy.py:3 _read(offline=...)"]


def test_the_contracts_listed_exist() -> None:
    known = {f"{module.__name__}:{qualname}" for module in _modules() for qualname, _ in _functions(module)}
    assert sorted(set(CONTRACTS) - known) == []
