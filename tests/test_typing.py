"""Type checkers see the public API's real types from a user's script, against the package installed as the README
installs it (``pip install -e .``).

The install is pip's, step by step: setuptools' editable wheel (``build_editable``, the hook pip calls), unpacked
into the site-packages of a fresh virtual environment. setuptools makes that wheel a plain path entry (a static
``.pth``) only because setup.cfg maps the package directory to the project root; otherwise it installs an import
hook that mypy cannot follow ("Cannot find implementation or library stub for module named 'glyphforge'").
"""
from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: A user's script: each revealed expression, then what its revealed type must contain.
REVEALED = {
    "gf.load_mnist": "def (classes:",
    "gf.load_emnist": "split: str | None =",
    "gf.prepare_mnist": "-> list[glyphforge.cache.entry.Entry]",
    "gf.MNIST": "def (root:",
    "gf.find_built": "def (",
    "gf.build": "def (",
    "gf.ScatteredGlyphs": "def (",
    "gf.load_mnist()[2]": "glyphforge.datasets.class_names.ClassNames",
    "built.stream": "seed: int =",
    "built.stream(8)": "glyphforge.builds.stream.stream.ShardStream",
}
SCRIPT = "import glyphforge as gf\n\n\ndef user(built: gf.BuiltDataset) -> None:\n" + "".join(
    f"    reveal_type({expression})\n" for expression in REVEALED)


def readme_install(into: Path) -> Path:
    """Install the project as ``pip install -e .`` does into a new virtual environment at ``into``; its python."""
    venv.EnvBuilder(with_pip=False).create(into)
    python = into / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    site_packages = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    wheels = into / "wheels"
    wheels.mkdir()
    built = subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; "
                            f"print(build_meta.build_editable({str(wheels)!r}))"],
                           cwd=ROOT, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    with zipfile.ZipFile(wheels / built.stdout.strip().splitlines()[-1]) as wheel:
        wheel.extractall(site_packages)
    return python


@pytest.mark.slow
def test_mypy_reveals_the_real_types_of_the_public_names_in_a_users_script(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[lint]' installs it)")
    python = readme_install(tmp_path / "venv")
    script = tmp_path / "user" / "train.py"
    script.parent.mkdir()
    script.write_text(SCRIPT, encoding="utf-8")
    checked = subprocess.run(  # in the user's directory: mypy also searches the current one
        [sys.executable, "-m", "mypy", script.name, "--python-executable", str(python), "--no-incremental",
         "--cache-dir", str(tmp_path / "mypy_cache"), "--config-file", "",
         "--python-version", f"{sys.version_info[0]}.{sys.version_info[1]}"],
        cwd=script.parent, capture_output=True, text=True, timeout=300)
    stdout, stderr = checked.stdout, checked.stderr
    assert "Cannot find implementation or library stub" not in stdout, stdout
    revealed = re.findall(r'^.*train\.py:\d+: note: Revealed type is "(.*)"$', stdout, flags=re.MULTILINE)
    assert len(revealed) == len(REVEALED), f"{stdout}\n{stderr}"
    for (expression, expected), found in zip(REVEALED.items(), revealed, strict=True):
        assert found != "Any" and expected in found, f"reveal_type({expression}) is {found!r}"


def _checking_only_methods() -> list[tuple[str, str, ast.FunctionDef]]:
    """``(module, class, method)`` of each method a class of glyphforge declares under ``if TYPE_CHECKING:``."""
    found = []
    for path in sorted((ROOT / "glyphforge").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found += [(module, node.name, method) for branch in node.body
                          if isinstance(branch, ast.If) and ast.unparse(branch.test) == "TYPE_CHECKING"
                          for method in branch.body if isinstance(method, ast.FunctionDef)]
    return found


def test_what_type_checkers_read_of_a_made_method_is_its_runtime_signature():
    """A method made at run time (``EMNIST.__init__ = config_option_init("split")``: mypy cannot type it) is
    declared for type checkers under ``if TYPE_CHECKING:``; that declaration has the runtime one's parameters,
    kinds, defaults and annotations, so the two cannot drift."""
    methods = _checking_only_methods()
    assert {(module, name) for module, name, _ in methods} >= {
        ("glyphforge.datasets.emnist", "EMNIST"), ("glyphforge.datasets.classes.mnist_form", "MNISTFamilyDataset")}
    for module, name, method in methods:
        runtime = inspect.signature(getattr(getattr(importlib.import_module(module), name), method.name))
        arguments = method.args
        groups = (("POSITIONAL_OR_KEYWORD", arguments.args), ("KEYWORD_ONLY", arguments.kwonlyargs))
        declared = [(argument.arg, kind, None if argument.annotation is None else ast.unparse(argument.annotation))
                    for kind, group in groups for argument in group]
        defaults = [ast.literal_eval(default) for default in [*arguments.defaults, *arguments.kw_defaults]]
        assert declared == [(parameter.name, parameter.kind.name, parameter.annotation if parameter.annotation
                             is not inspect.Parameter.empty else None) for parameter in runtime.parameters.values()], \
            f"{module}.{name}.{method.name}"
        assert defaults == [parameter.default for parameter in runtime.parameters.values()
                            if parameter.default is not inspect.Parameter.empty], f"{module}.{name}.{method.name}"
