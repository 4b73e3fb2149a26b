"""The public API: every exported name resolves, and `import glyphforge` stays light."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import glyphforge


def test_every_exported_name_resolves_to_its_module_object():
    import glyphforge.datasets.emnist as emnist
    import glyphforge.datasets.omniglot.dataset as omniglot
    import glyphforge.loaders as loaders

    for name in glyphforge.__all__:
        assert getattr(glyphforge, name) is not None, name
    assert glyphforge.Omniglot is omniglot.Omniglot and glyphforge.EMNIST is emnist.EMNIST
    assert glyphforge.batches is loaders.batches and glyphforge.ImageList is loaders.ImageList
    assert callable(glyphforge.build) and glyphforge.build.__module__ == "glyphforge.builds.making.builder"
    assert sorted(dir(glyphforge)) == sorted(glyphforge.__all__)
    for preset in ("moving_mnist", "multi_mnist", "visual_arithmetic", "grid_arithmetic", "cluttered_mnist"):
        assert getattr(glyphforge, preset).__module__ == "glyphforge.scenes.presets", preset


@pytest.mark.parametrize("module", ["glyphforge", "glyphforge.scenes.spec"])
def test_import_does_not_load_numba_dask_pillow_or_the_hf_extra(module):
    code = (
        f"import sys, {module}; "
        "print(sorted(m for m in ('numba', 'dask', 'distributed', 'PIL', 'pyarrow', 'datasets') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


@pytest.mark.parametrize("code", ["import glyphforge.datasets",
                                  "import glyphforge as gf; gf.MNIST, gf.FashionMNIST, gf.EMNIST, gf.Omniglot"])
def test_importing_the_datasets_does_not_load_tqdm_or_requests(code):
    """A progress bar's module is imported where a bar is made (~20 ms of a cold start), and requests where a
    request is made (~0.1 s), not by the datasets."""
    report = "print([m for m in ('tqdm', 'requests', 'urllib3') if m in sys.modules])"
    loaded = subprocess.run([sys.executable, "-c", f"import sys; {code}; {report}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


def _static_view() -> dict[str, str]:
    """``{name: module}`` of the imports under ``if TYPE_CHECKING:`` in glyphforge/__init__.py (what type checkers
    and IDEs read), each checked to be an explicit re-export (``import NAME as NAME``)."""
    tree = ast.parse(Path(glyphforge.__file__).read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module, ast.unparse(statement)
                for alias in statement.names:
                    assert alias.asname == alias.name, f"write `{alias.name} as {alias.name}` (an explicit re-export)"
                    found[alias.name] = statement.module
    return found


def test_type_checkers_see_every_lazy_name_from_the_module_it_is_imported_from():
    """The static view and the lazy table (with the datasets' registry exports) name the same objects, so
    a name added to one is added to the other."""
    assert _static_view() == glyphforge._EXPORTS
