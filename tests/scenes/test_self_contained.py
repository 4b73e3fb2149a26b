"""``scenes/`` is self-contained (issue 44): it uses datasets through ``glyphforge.datasets``'s public names only,
and its command-line options live in ``glyphforge.scenes``, which imports no argparse-assembling CLI module.

Checked by parsing the source, as tests/test_layers.py does: every import at any depth (inside functions and
``if TYPE_CHECKING:`` blocks too) and every ``importlib.import_module("...")`` with a literal name.
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

import glyphforge
from glyphforge import datasets

SCENES = Path(glyphforge.__file__).parent / "scenes"


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """``(line, statement, [module or module.name, ...])`` of every import of ``path``, relative ones resolved."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.append((node.lineno, ast.unparse(node), [alias.name for alias in node.names]))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join(["glyphforge", "scenes"][: 3 - node.level] + ([module] if module else []))
            found.append((node.lineno, ast.unparse(node), [f"{module}.{alias.name}" for alias in node.names]))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            found.append((node.lineno, ast.unparse(node), [str(node.args[0].value)]))
    return found


def test_scenes_import_only_glyphforge_datasets_itself_of_datasets():
    """``from glyphforge.datasets import NAME`` with NAME one of its public names, or ``from glyphforge import
    datasets``; never a module below it (``glyphforge.datasets.registry``, ``.own_copies``, ``.classes...``)."""
    wrong = []
    for path in sorted(SCENES.rglob("*.py")):
        for line, statement, names in _imports(path):
            for name in names:
                if name == "glyphforge.datasets":
                    continue
                within = name.startswith("glyphforge.datasets.")
                public = within and name.count(".") == 2 and name.rpartition(".")[2] in datasets.__all__
                if within and not public:
                    wrong.append(f"{path.name}:{line}: `{statement}`")
    assert not wrong, "scenes use glyphforge.datasets' public names only (add what they need there):\n" + \
        "\n".join(sorted(set(wrong)))


def test_the_public_names_scenes_use_are_documented():
    missing = [name for name in datasets.__all__ if name not in (datasets.__doc__ or "")]
    assert not missing, f"glyphforge.datasets' docstring should say what {missing} are for"


@pytest.mark.parametrize("flag", ["--glyph-shape", "--backgrounds", "--colours", "--grid-shape", "--seed"])
def test_the_scene_options_are_added_by_scenes_with_a_parser_of_their_own(flag):
    """``glyphforge.scenes.arguments`` adds the scene options to any parser: the command line only gives the
    shape type and the glyph datasets' options."""
    from glyphforge.scenes.arguments import add_scene_arguments, scene_spec

    parser = argparse.ArgumentParser()
    add_scene_arguments(parser, lambda text: tuple(map(int, text.split("x"))), lambda parser, option: None)
    assert flag in parser.format_help()
    spec = scene_spec(parser.parse_args(["--n-examples", "3", "--glyph-shape", "9x9", "--colours", "red,blue"]), {})
    assert (spec.n_examples, spec.glyph_shape, spec.colours) == (3, (9, 9), ((255, 0, 0), (0, 0, 255)))
