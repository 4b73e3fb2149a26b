"""Layering: every module of glyphforge has a layer, no module imports a layer above its own, no module
imports itself through others (no import circle), and no module is over 500 lines.

One layer per package, bottom to top (a module may import its own layer and those below it; the
order is what the code needs, measured on its import graph):

===========  ===================================================================================
foundation   ``_access``, ``_checks``, ``_files``, ``_version``, ``errors``, ``hashes``, ``hf``,
             ``textfmt``, ``urls``: no glyphforge import but each other
config       where glyphforge keeps its files, the ``GLYPHFORGE_*`` variables
storage      bytes at places: backends, the table of schemes, reads, writes, retries (no cache import)
cache        the content-addressed store of entries, manifests, locks, upstream files' records; the local
             and URL stores behind one protocol, pulling through and publishing (``cache/remote``)
pipelines    the kernels and I/O helpers: downloads, archives, IDX, decoding, resizing
session      where a build's tasks run
batching     the one batcher and the map-style protocol
visualize    PNG grids of examples
context      the data context (over the cache store and storage)
datasets     the dataset modules and their registry; the per-class machinery, Omniglot
loaders      users' own image files
builds       built datasets: making, reading, the decoded copy, the stream, export
scenes       scenes of glyphs over backgrounds (an application on datasets and builds)
previews     what ``glyphforge preview`` draws
warmup       every numba kernel compiled once
cli          the command line (one module per command group), ``__main__`` (``python -m glyphforge``), and
             ``view``, the local web viewer ``glyphforge view`` serves
face         the package face ``glyphforge`` (whose ``__init__`` re-exports everything, so
             importing a name from it can import every layer)
===========  ===================================================================================

The modules are found from the package's files, so a new module is checked as soon as it
exists: one inside a subpackage has its subpackage's layer, and a new top-level module
fails `test_every_module_has_a_layer` until it is given one in :data:`LAYERS`.

Every ``import``, ``from ... import`` (relative ones too, and those inside functions or
``if TYPE_CHECKING:`` blocks) and ``importlib.import_module("...")`` with a literal name
is checked, by parsing the source: nothing is imported to run this test. The same imports,
module to module, make the graph whose circles (strongly connected components) are found.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "glyphforge"
ARCHITECTURE = PACKAGE_DIR.parent / "docs" / "architecture.md"

#: Layers bottom to top: ``(layer name, the top-level modules and subpackages it holds)``.
Layers = tuple[tuple[str, tuple[str, ...]], ...]

#: glyphforge's layers (``__init__`` is the package face itself).
LAYERS: Layers = (
    ("foundation", ("_access", "_checks", "_files", "_version", "errors", "hashes", "hf", "textfmt", "urls")),
    ("config", ("config",)),
    ("storage", ("storage",)),
    ("cache", ("cache",)),
    ("pipelines", ("pipelines",)),
    ("session", ("session",)),
    ("batching", ("batching",)),
    ("visualize", ("visualize",)),
    ("context", ("context",)),
    ("datasets", ("datasets",)),
    ("loaders", ("loaders",)),
    ("builds", ("builds",)),
    ("scenes", ("scenes",)),
    ("previews", ("previews",)),
    ("warmup", ("warmup",)),
    ("cli", ("cli", "view", "__main__")),
    ("face", ("__init__",)),
)

#: The most lines a module may have.
MAX_LINES = 500


@dataclass(frozen=True)
class Violation:
    """One forbidden import: where it is, the statement, and why it is forbidden."""

    path: str
    line: int
    statement: str
    module: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: `{self.statement}` {self.reason}"


def package_modules(package_dir: Path) -> list[Path]:
    """Return every module file of the package at ``package_dir``."""
    return sorted(package_dir.rglob("*.py"))


def layer_of(module: str, package: str, layers: Layers = LAYERS) -> int | None:
    """Return the number of ``module``'s layer (0 at the bottom), or None when no layer holds it."""
    top = "__init__" if module == package else module.split(".")[1]
    return next((number for number, (_, names) in enumerate(layers) if top in names), None)


def _module_name(path: Path, package_dir: Path) -> str:
    parts = [package_dir.name, *path.relative_to(package_dir).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_submodule(module: str, name: str, package_dir: Path) -> bool:
    """Whether ``from module import name`` imports a module (a file or package) rather than an attribute."""
    base = package_dir.parent.joinpath(*module.split("."), name)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _resolve(node: ast.ImportFrom, path: Path, package_dir: Path) -> str:
    """The absolute module a ``from ... import`` reads from (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    package = _module_name(path, package_dir).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _literal_import_module(node: ast.Call) -> str | None:
    """The name in ``importlib.import_module("...")`` / ``import_module("...")`` / ``__import__("...")``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imported_modules(path: Path, package_dir: Path) -> list[tuple[int, str, str]]:
    """Return ``(line, statement, module)`` for every module ``path`` imports, at any depth of its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, ast.unparse(node), alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node, path, package_dir)
            for alias in node.names:
                submodule = alias.name != "*" and _is_submodule(module, alias.name, package_dir)
                found.append((node.lineno, ast.unparse(node), f"{module}.{alias.name}" if submodule else module))
        elif isinstance(node, ast.Call) and (name := _literal_import_module(node)) is not None:
            if name.startswith("."):
                package = _module_name(path, package_dir).rsplit(".", 0 if path.name == "__init__.py" else 1)[0]
                name = package + name
            found.append((node.lineno, ast.unparse(node), name))
    return sorted(found)


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def unlayered(package_dir: Path, layers: Layers = LAYERS) -> list[str]:
    """Return the package's modules no layer holds, and the layer names that hold no module."""
    package = package_dir.name
    modules = [_module_name(path, package_dir) for path in package_modules(package_dir)]
    missing = [module for module in modules if layer_of(module, package, layers) is None]
    tops = {"__init__" if module == package else module.split(".")[1] for module in modules}
    stale = [f"{name} (in layer {layer}: no such module)" for layer, names in layers for name in names
             if name not in tops]
    return missing + stale


def upward_imports(package_dir: Path, files: list[Path] | None = None, layers: Layers = LAYERS) -> list[Violation]:
    """Return every import in ``files`` (default: every module) of a layer above the importing module's."""
    package = package_dir.name
    violations = []
    for path in package_modules(package_dir) if files is None else files:
        own = _module_name(path, package_dir)
        own_layer = layer_of(own, package, layers)
        shown = path.relative_to(package_dir.parent).as_posix()
        for line, statement, module in imported_modules(path, package_dir):
            if not _within(module, package) or own_layer is None:
                continue
            layer = layer_of(module, package, layers)
            if layer is None:
                reason = f"imports `{module}`, which no layer holds (no such module?)"
            elif layer <= own_layer:
                continue
            elif module == package:
                reason = (f"imports from the package face `{package}` (import the submodule that defines the "
                          "name)")
            else:
                reason = (f"imports `{module}` (layer {layers[layer][0]}), above {shown} (layer "
                          f"{layers[own_layer][0]})")
            violations.append(Violation(shown, line, statement, module, reason))
    return violations


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Return ``{module: the package's modules it imports}``, every import at any depth counted (not itself)."""
    package = package_dir.name
    names = {_module_name(path, package_dir): path for path in package_modules(package_dir)}
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name, path in names.items():
        for _, _, module in imported_modules(path, package_dir):
            while module and module not in names:  # an attribute of a module: that module
                module = module.rpartition(".")[0]
            if _within(module, package) and module != name:
                graph[name].add(module)
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Return the circles of ``graph``: its strongly connected components of two modules or more (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[frozenset[str]] = []

    def visit(module: str) -> None:  # recursion depth: the longest import chain, a few dozen
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = set()
            while not component or module not in component:
                component.add(stack.pop())
            on_stack.difference_update(component)
            if len(component) > 1:
                circles.append(frozenset(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def long_modules(package_dir: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """Return ``{path below the package: lines}`` of the modules over ``limit`` lines."""
    counts = {path.relative_to(package_dir).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
              for path in package_modules(package_dir)}
    return {name: lines for name, lines in counts.items() if lines > limit}


# -- the real package ----------------------------------------------------------------------
def test_every_module_has_a_layer():
    assert unlayered(PACKAGE_DIR) == [], "give each a layer in LAYERS (or remove the stale name)"
    names = {path.relative_to(PACKAGE_DIR).as_posix() for path in package_modules(PACKAGE_DIR)}
    assert {"pipelines/download.py", "cache/store.py", "loaders.py", "visualize.py", "warmup.py", "textfmt.py",
            "context.py", "cli/__init__.py", "__init__.py", "builds/stream/stream.py"} <= names


@pytest.mark.parametrize(
    "path", package_modules(PACKAGE_DIR), ids=lambda path: path.relative_to(PACKAGE_DIR).as_posix()
)
def test_module_imports_nothing_above_its_layer(path):
    violations = upward_imports(PACKAGE_DIR, [path])
    assert not violations, "upward imports (move the code down, or the import up):\n" + "\n".join(
        map(str, violations)
    )


def test_no_import_circles():
    circles = [sorted(circle) for circle in import_circles(import_graph(PACKAGE_DIR))]
    assert not circles, "import circles (move what both need down, or pass it in):\n" + "\n".join(map(str, circles))


def test_no_module_is_over_the_line_limit():
    long = long_modules(PACKAGE_DIR)
    assert not long, f"modules over {MAX_LINES} lines (split each into modules of one job): {long}"


#: The one package that may talk to fsspec: its backends are where a store's client is used.
STORAGE = "storage"


def fsspec_uses(package_dir: Path) -> list[str]:
    """``path:line: code`` of each import of fsspec and each ``.fs`` attribute (a `Location`'s or a backend's fsspec
    filesystem) outside ``<package>/storage/``."""
    found = []
    for path in package_modules(package_dir):
        relative = path.relative_to(package_dir)
        if relative.parts[0] == STORAGE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, statement, module in imported_modules(path, package_dir):
            if module == "fsspec" or module.startswith("fsspec."):
                found.append(f"{relative}:{line}: {statement}")
        found += [f"{relative}:{node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr == "fs"]
    return found


def retry_stack(package_dir: Path) -> dict[str, list[str]]:
    """Where each part of a retry stack is defined, ``path:line``: retry policy classes (a class with a ``delay``
    method), ``DEFAULT_POLICY``, Retry-After parsers (a function whose name holds ``retry_after``) and Content-Range
    patterns (a string constant ``^bytes ...``)."""
    found: dict[str, list[str]] = {"policy class": [], "DEFAULT_POLICY": [], "Retry-After parser": [],
                                   "Content-Range pattern": []}
    for path in package_modules(package_dir):
        relative = path.relative_to(package_dir).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(item, ast.FunctionDef) and item.name == "delay" for item in node.body):
                found["policy class"].append(f"{relative}:{node.lineno}")
            elif isinstance(node, ast.Assign) and any(
                    isinstance(target, ast.Name) and target.id == "DEFAULT_POLICY" for target in node.targets):
                found["DEFAULT_POLICY"].append(f"{relative}:{node.lineno}")
            elif isinstance(node, ast.FunctionDef) and "retry_after" in node.name:
                found["Retry-After parser"].append(f"{relative}:{node.lineno}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("^bytes "):
                found["Content-Range pattern"].append(f"{relative}:{node.lineno}")
    return found


def test_nothing_outside_storage_calls_fsspec():
    uses = fsspec_uses(PACKAGE_DIR)
    assert uses == [], "only the storage backends talk to fsspec: do it through the Backend interface " \
                       "(glyphforge/storage/backend.py), adding an operation when one is missing:\n" + "\n".join(uses)


def test_there_is_one_retry_stack_in_storage():
    stack = retry_stack(PACKAGE_DIR)
    assert {part: len(places) for part, places in stack.items()} == dict.fromkeys(stack, 1), stack
    assert all(places[0].startswith(f"{STORAGE}/") for places in stack.values()), stack


def test_the_fsspec_checker_finds_an_import_and_a_filesystem_call(tmp_path):
    root = _write(tmp_path, {
        "glyphforge/__init__.py": "", "glyphforge/storage/__init__.py": "",
        "glyphforge/storage/backend.py": "import fsspec\nfs = fsspec.filesystem('file')\nfs.fs = fs\n",
        "glyphforge/cache/__init__.py": "", "glyphforge/cache/remote.py": "from fsspec.callbacks import Callback\n",
        "glyphforge/pipelines/__init__.py": "",
        "glyphforge/pipelines/sources.py": "def copy(location):\n    return location.fs.open('x')\n",
    })
    assert fsspec_uses(root) == ["cache/remote.py:1: from fsspec.callbacks import Callback",
                                 "pipelines/sources.py:2: location.fs"]


def architecture_module_rows(text: str) -> dict[str, str]:
    """Return ``{module path: layer}`` from the "Modules" table of the docs' architecture page."""
    section = text.split("\n## Modules\n", 1)[1].split("\n#", 1)[0]
    return dict(re.findall(r"^\| `glyphforge/([^`]+)` \| .+ \| (\w+) \|$", section, flags=re.MULTILINE))


def test_the_top_level_of_builds_is_its_packages_and_its_face():
    folder = PACKAGE_DIR / "builds"
    loose = sorted(path.name for path in folder.glob("*.py") if path.name != "__init__.py")
    assert not loose, f"glyphforge/builds/ holds modules beside its packages: {loose}; put each in its package"
    assert sorted(path.parent.name for path in folder.glob("*/__init__.py")) == [
        "decoded_copy", "export", "making", "reading", "stream"]


def test_this_docstring_and_the_architecture_page_list_the_layers_in_order():
    documented = re.findall(r"^(\w+) {2,}", __doc__.split("===\n", 1)[1].split("\n====", 1)[0], flags=re.MULTILINE)
    assert documented == [name for name, _ in LAYERS], "tests/test_layers.py's docstring table: the layers of LAYERS"
    page = ARCHITECTURE.read_text(encoding="utf-8").split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\w+) \| ", page, flags=re.MULTILINE)
    assert rows == [name for name, _ in LAYERS], "docs/architecture.md's layer table: the layers of LAYERS"


def test_the_architecture_page_lists_every_module_with_its_layer():
    rows = architecture_module_rows(ARCHITECTURE.read_text(encoding="utf-8"))
    for path in package_modules(PACKAGE_DIR):
        name = path.relative_to(PACKAGE_DIR).as_posix()
        number = layer_of(_module_name(path, PACKAGE_DIR), PACKAGE_DIR.name)
        layer = "(none)" if number is None else LAYERS[number][0]
        assert name in rows, f"docs/architecture.md's module table lacks glyphforge/{name}: add a row (layer {layer})"
        assert rows[name] == layer, (f"docs/architecture.md puts glyphforge/{name} in layer {rows[name]}; "
                                     f"it is in {layer}")


# -- the checker itself -------------------------------------------------------------------
def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "glyphforge"


TOY_LAYERS: Layers = (
    ("foundation", ("_checks", "_files")),
    ("lower", ("pipelines", "config")),
    ("datasets", ("datasets",)),
    ("face", ("cli", "__init__")),
)


def test_checker_reports_each_kind_of_upward_import(tmp_path):
    package_dir = _write(tmp_path, {
        "glyphforge/__init__.py": "__version__ = '0'\n",
        "glyphforge/config.py": "",
        "glyphforge/cli.py": "import glyphforge\nfrom glyphforge.datasets import emnist\n",
        "glyphforge/_checks.py": "from glyphforge._files import x\nfrom glyphforge.config import y\n",
        "glyphforge/_files.py": "",
        "glyphforge/datasets/__init__.py": "",
        "glyphforge/datasets/emnist.py": "from glyphforge.shards import gone\n",
        "glyphforge/pipelines/__init__.py": "",
        "glyphforge/pipelines/ok.py": "",
        "glyphforge/pipelines/bad.py": (
            "import importlib\n"
            "from glyphforge import __version__\n"
            "from glyphforge import config\n"
            "from glyphforge.pipelines import ok\n"
            "from . import ok as again\n"
            "from ..datasets import emnist\n"
            "\n"
            "def later():\n"
            "    from glyphforge.datasets.emnist import load\n"
            "    importlib.import_module('glyphforge.cli')\n"
            "    importlib.import_module('glyphforge.pipelines.ok')\n"
            "    import glyphforge\n"
        ),
    })
    reported = [str(violation) for violation in upward_imports(package_dir, layers=TOY_LAYERS)]
    assert reported == [
        "glyphforge/_checks.py:2: `from glyphforge.config import y` imports `glyphforge.config` (layer lower), "
        "above glyphforge/_checks.py (layer foundation)",
        "glyphforge/datasets/emnist.py:1: `from glyphforge.shards import gone` imports `glyphforge.shards`, which "
        "no layer holds (no such module?)",
        "glyphforge/pipelines/bad.py:2: `from glyphforge import __version__` imports from the package face "
        "`glyphforge` (import the submodule that defines the name)",
        "glyphforge/pipelines/bad.py:6: `from ..datasets import emnist` imports `glyphforge.datasets.emnist` "
        "(layer datasets), above glyphforge/pipelines/bad.py (layer lower)",
        "glyphforge/pipelines/bad.py:9: `from glyphforge.datasets.emnist import load` imports "
        "`glyphforge.datasets.emnist` (layer datasets), above glyphforge/pipelines/bad.py (layer lower)",
        "glyphforge/pipelines/bad.py:10: `importlib.import_module('glyphforge.cli')` imports `glyphforge.cli` "
        "(layer face), above glyphforge/pipelines/bad.py (layer lower)",
        "glyphforge/pipelines/bad.py:12: `import glyphforge` imports from the package face `glyphforge` "
        "(import the submodule that defines the name)",
    ]


def test_unlayered_names_new_modules_and_stale_layer_names(tmp_path):
    package_dir = _write(tmp_path, {
        "glyphforge/__init__.py": "",
        "glyphforge/_checks.py": "",
        "glyphforge/_files.py": "",
        "glyphforge/config.py": "",
        "glyphforge/pipelines/__init__.py": "",
        "glyphforge/pipelines/new_kernel.py": "",
        "glyphforge/datasets/__init__.py": "",
        "glyphforge/newcomer.py": "",
    })
    assert layer_of("glyphforge.pipelines.new_kernel", "glyphforge", TOY_LAYERS) == 1
    assert unlayered(package_dir, TOY_LAYERS) == ["glyphforge.newcomer", "cli (in layer face: no such module)"]


def test_circles_are_found_through_lazy_type_checking_and_relative_imports(tmp_path):
    package_dir = _write(tmp_path, {
        "glyphforge/__init__.py": "",
        "glyphforge/a.py": "def later():\n    from glyphforge import b\n",
        "glyphforge/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from glyphforge.pkg.c import C\n",
        "glyphforge/pkg/__init__.py": "",
        "glyphforge/pkg/c.py": "from .. import a\nfrom . import d\n",
        "glyphforge/pkg/d.py": "import importlib\nimportlib.import_module('glyphforge.pkg.e')\n",
        "glyphforge/pkg/e.py": "from glyphforge.pkg.d import x\nfrom glyphforge.pkg import e\n",  # itself: no circle
        "glyphforge/f.py": "from glyphforge import a\n",  # imports a circle, is in none
    })
    assert sorted(map(sorted, import_circles(import_graph(package_dir)))) == [
        ["glyphforge.a", "glyphforge.b", "glyphforge.pkg.c"],
        ["glyphforge.pkg.d", "glyphforge.pkg.e"],
    ]


def test_long_modules_counts_lines(tmp_path):
    package_dir = _write(tmp_path, {"glyphforge/__init__.py": "", "glyphforge/pkg/long.py": "x = 1\n" * 6,
                                    "glyphforge/short.py": "x = 1\n" * 5})
    assert long_modules(package_dir, limit=5) == {"pkg/long.py": 6}


def test_checker_passes_a_clean_package(tmp_path):
    package_dir = _write(tmp_path, {
        "glyphforge/__init__.py": "from glyphforge.pipelines.ok import x\n",
        "glyphforge/cli.py": "import glyphforge\nfrom glyphforge.datasets import d\n",
        "glyphforge/datasets/__init__.py": "from glyphforge.pipelines import ok\n",
        "glyphforge/datasets/d.py": "from . import e\n",
        "glyphforge/datasets/e.py": "from glyphforge.datasets import d\n",  # a circle within a layer
        "glyphforge/pipelines/__init__.py": "",
        "glyphforge/pipelines/ok.py": "from glyphforge._checks import check_int\nimport numpy\n",
        "glyphforge/_checks.py": "import os\nfrom glyphforge._files import x\n",
        "glyphforge/_files.py": "",
    })
    assert upward_imports(package_dir, layers=TOY_LAYERS) == []
