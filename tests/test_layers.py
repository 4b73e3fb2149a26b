"""Layering: the lower layers of glyphforge never import the layers above them.

The lower layers are the kernels and I/O helpers (``glyphforge.pipelines``), the cache,
the sessions, batching, configuration and the foundation modules (``_checks``, ``_files``,
``_version``, ``_deprecation``). They must not import the dataset modules, the builds, the
command line, the previews, or the package face ``glyphforge`` itself (whose ``__init__``
re-exports everything, so importing a name from it can import every layer). The
foundation modules import nothing from glyphforge but each other.

Every ``import``, ``from ... import`` (relative ones too, and those inside functions or
``if TYPE_CHECKING:`` blocks) and ``importlib.import_module("...")`` with a literal name
is checked, by parsing the source: nothing is imported to run this test.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "glyphforge"

#: Packages (every module under them) and modules forming the lower layers, relative to the package.
LOWER_PACKAGES = ("pipelines", "cache", "session")
LOWER_MODULES = ("batching.py", "config.py", "_checks.py", "_files.py", "_version.py", "_deprecation.py")

#: What a lower layer must not import (these modules and everything below them).
UPPER = (
    "glyphforge.datasets",
    "glyphforge.builds",
    "glyphforge.cli",
    "glyphforge.previews",
    "glyphforge.build",
    "glyphforge.shards",
)
#: The foundation: these import nothing from glyphforge except each other.
FOUNDATION = ("glyphforge._checks", "glyphforge._files", "glyphforge._version", "glyphforge._deprecation")


@dataclass(frozen=True)
class Violation:
    """One forbidden import: where it is, the statement, and why it is forbidden."""

    path: str
    line: int
    statement: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: `{self.statement}` {self.reason}"


def lower_layer_files(package_dir: Path) -> list[Path]:
    """Return the lower-layer modules of the package at ``package_dir``."""
    files = [path for name in LOWER_PACKAGES for path in sorted((package_dir / name).rglob("*.py"))]
    return files + [package_dir / name for name in LOWER_MODULES if (package_dir / name).is_file()]


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


def upward_imports(package_dir: Path, files: list[Path] | None = None) -> list[Violation]:
    """Return every forbidden import of the lower layers of the package at ``package_dir``."""
    package = package_dir.name
    upper = tuple(prefix.replace("glyphforge", package, 1) for prefix in UPPER)
    foundation = tuple(name.replace("glyphforge", package, 1) for name in FOUNDATION)
    violations = []
    for path in lower_layer_files(package_dir) if files is None else files:
        own = _module_name(path, package_dir)
        shown = path.relative_to(package_dir.parent).as_posix()
        for line, statement, module in imported_modules(path, package_dir):
            if module == package:
                reason = f"imports from the package face `{package}` (import the submodule that defines the name)"
            elif any(_within(module, prefix) for prefix in upper):
                reason = f"imports `{module}`, a layer above {shown}"
            elif own in foundation and _within(module, package) and module not in foundation:
                reason = f"imports `{module}`: {shown} may import only {', '.join(foundation)}"
            else:
                continue
            violations.append(Violation(shown, line, statement, reason))
    return violations


# -- the real package ----------------------------------------------------------------------
def test_the_lower_layers_are_found():
    names = {path.relative_to(PACKAGE_DIR).as_posix() for path in lower_layer_files(PACKAGE_DIR)}
    expected = {"pipelines/download.py", "cache/store.py", "session/__init__.py", "config.py", "_checks.py"}
    assert expected <= names, f"the layer check no longer sees {sorted(expected - names)}"


@pytest.mark.parametrize(
    "path", lower_layer_files(PACKAGE_DIR), ids=lambda path: path.relative_to(PACKAGE_DIR).as_posix()
)
def test_lower_layer_imports_nothing_above_it(path):
    violations = upward_imports(PACKAGE_DIR, [path])
    assert not violations, "upward imports (move the code down, or the import up):\n" + "\n".join(
        map(str, violations)
    )


# -- the checker itself -------------------------------------------------------------------
def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "glyphforge"


def test_checker_reports_each_kind_of_upward_import(tmp_path):
    package_dir = _write(tmp_path, {
        "glyphforge/__init__.py": "__version__ = '0'\n",
        "glyphforge/config.py": "",
        "glyphforge/cli.py": "",
        "glyphforge/_checks.py": "from glyphforge._files import x\nfrom glyphforge.config import y\n",
        "glyphforge/_files.py": "",
        "glyphforge/datasets/__init__.py": "",
        "glyphforge/datasets/emnist.py": "",
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
    reported = [str(violation) for violation in upward_imports(package_dir)]
    assert reported == [
        "glyphforge/pipelines/bad.py:2: `from glyphforge import __version__` imports from the package face "
        "`glyphforge` (import the submodule that defines the name)",
        "glyphforge/pipelines/bad.py:6: `from ..datasets import emnist` imports `glyphforge.datasets.emnist`, "
        "a layer above glyphforge/pipelines/bad.py",
        "glyphforge/pipelines/bad.py:9: `from glyphforge.datasets.emnist import load` imports "
        "`glyphforge.datasets.emnist`, a layer above glyphforge/pipelines/bad.py",
        "glyphforge/pipelines/bad.py:10: `importlib.import_module('glyphforge.cli')` imports `glyphforge.cli`, "
        "a layer above glyphforge/pipelines/bad.py",
        "glyphforge/pipelines/bad.py:12: `import glyphforge` imports from the package face `glyphforge` "
        "(import the submodule that defines the name)",
        "glyphforge/_checks.py:2: `from glyphforge.config import y` imports `glyphforge.config`: "
        "glyphforge/_checks.py may import only glyphforge._checks, glyphforge._files, glyphforge._version, "
        "glyphforge._deprecation",
    ]


def test_checker_passes_a_clean_package(tmp_path):
    package_dir = _write(tmp_path, {
        "glyphforge/__init__.py": "from glyphforge.pipelines.ok import x\n",
        "glyphforge/pipelines/__init__.py": "",
        "glyphforge/pipelines/ok.py": "from glyphforge._checks import check_int\nimport numpy\n",
        "glyphforge/_checks.py": "import os\nfrom glyphforge._version import __version__\n",
        "glyphforge/_version.py": "",
    })
    assert upward_imports(package_dir) == []
