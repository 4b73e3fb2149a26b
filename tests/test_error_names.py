"""Error names a user can rely on (issue #44): every public exception under the root, one error per case, one
word for damaged data, and messages naming only what exists.

The classes are found by importing every glyphforge module (`pkgutil.walk_packages`): an
exception is public when a module shows it under a name not starting with ``_``.
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import glyphforge as gf
from glyphforge.errors import GlyphforgeError

PACKAGE_DIR = Path(gf.__file__).resolve().parent

#: Words an error name may not use for damaged data: it says Damaged (data missing may say Missing).
OTHER_WORDS_FOR_DAMAGED = {"Corrupt", "Corrupted", "Broken", "Lost", "Bad", "Invalid", "Mangled", "Truncated"}


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def public_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class shown under a public name: at ``glyphforge.`` (of any origin) or by a glyphforge module
    (those glyphforge defines), by qualified name."""
    found: dict[str, type[BaseException]] = {}
    shown = [(name, getattr(gf, name)) for name in gf.__all__]
    for module in pkgutil.walk_packages(gf.__path__, "glyphforge."):
        shown.extend((name, value) for name, value in vars(importlib.import_module(module.name)).items()
                     if isinstance(value, type) and value.__module__.startswith("glyphforge"))
    for name, value in shown:
        if isinstance(value, type) and issubclass(value, BaseException) and not name.startswith("_"):
            found[_qualified(value)] = value
    return found


PUBLIC = public_exceptions()


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_exception_derives_from_the_root(name):
    assert issubclass(PUBLIC[name], GlyphforgeError), \
        f"{name} is public and outside the root: derive it from a family of glyphforge.errors, or name it _{name}"


def test_the_public_exceptions_were_found():
    assert len(PUBLIC) > 50 and "glyphforge.errors.GlyphforgeError" in PUBLIC
    assert "glyphforge.cache.remote.entries.UnlistableDataDirError" in PUBLIC  # found in its module, and public


def test_one_word_for_damaged_data_in_every_error_name():
    words = {name: set(re.findall(r"[A-Z][a-z]+", cls.__name__)) for name, cls in PUBLIC.items()}
    other = sorted(f"{name} ({', '.join(sorted(found & OTHER_WORDS_FOR_DAMAGED))})"
                   for name, found in words.items() if found & OTHER_WORDS_FOR_DAMAGED)
    assert other == [], "call damaged data Damaged (DamagedManifestError...): one word across the error names"
    assert {"DamagedManifestError", "DamagedPklzError", "DamagedShardsError", "DamagedRemoteEntryError"} <= \
        {cls.__name__ for cls in PUBLIC.values()}


# -- one error per case ------------------------------------------------------------------------
def _unlistable_find_built() -> None:
    gf.find_built("scenes", data_dir="https://example.invalid/data")


def _unlistable_cache_ls() -> None:
    gf.DataContext.resolve(data_dir="https://example.invalid/data").entry_store.ls()


def _read_only_build() -> None:
    from support.specs import NoiseSpec

    gf.build(NoiseSpec(n_examples=4, shard_size=2, kind="test-ro"), data_dir="https://example.invalid/data",
             session="local", progress=False)


def _read_only_cache_rm() -> None:
    gf.DataContext.resolve(data_dir="https://example.invalid/data").entry_store.rm("0123456789ab")


def _read_only_write() -> None:
    from glyphforge.storage.location import Location
    from glyphforge.storage.objects import write_bytes

    write_bytes(Location("https://example.invalid/data/x"), b"x")


@pytest.mark.parametrize(("call", "error", "said"), [
    (_unlistable_find_built, "UnlistableDataDirError", "cannot be listed (over HTTPS there is no listing)"),
    (_unlistable_cache_ls, "UnlistableDataDirError", "cannot be listed: HTTP has no listing"),
    (_read_only_build, "ReadOnlyStoreError", "cannot build into https://example.invalid/data"),
    (_read_only_cache_rm, "ReadOnlyStoreError", "never deletes anything at a URL"),
    (_read_only_write, "ReadOnlyStoreError", "cannot write https://example.invalid/data/x"),
], ids=["find_built", "cache ls", "build", "cache rm", "write"])
def test_one_error_per_case_public_at_the_top(call, error, said):
    """A data dir at a URL that cannot be listed, and a write glyphforge does not make there: one class each,
    whoever refuses it, before any request."""
    with pytest.raises(getattr(gf, error), match=re.escape(said)) as raised:
        call()
    assert type(raised.value) is getattr(gf, error) and isinstance(raised.value, gf.ArgumentError)
    assert error in gf.__all__
    if error == "UnlistableDataDirError":  # the builtin bases of both former twins
        assert isinstance(raised.value, LookupError) and isinstance(raised.value, ValueError)


def test_the_twins_are_gone():
    names = {cls.__name__ for cls in PUBLIC.values()}
    assert not names & {"UnlistableURLError", "ReadOnlyDataDirError"}


# -- messages name what exists -----------------------------------------------------------------
def _message_parts() -> list[tuple[str, int, str]]:
    """``(module file, line, text)`` of every string in glyphforge naming ``glyphforge.``, docstrings left out."""
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        docstrings: set[int] = set()
        strings = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and \
                    ast.get_docstring(node, clean=False) is not None:
                docstrings.add(id(node.body[0].value))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "glyphforge." in node.value:
                strings.append(node)
        found.extend((str(path.relative_to(PACKAGE_DIR)), node.lineno, node.value) for node in strings
                     if id(node) not in docstrings)
    return found


def _exists(dotted: str) -> bool:
    """Whether ``glyphforge.a.b.c`` names a module, or an attribute of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_dotted_glyphforge_name_a_message_gives_exists():
    named = [(where, line, dotted) for where, line, text in _message_parts()
             for dotted in re.findall(r"\bglyphforge(?:\.[A-Za-z_]\w*)+", text)]
    assert len(named) > 20 and any(dotted == "glyphforge.find_built" for _, _, dotted in named)
    missing = [f"{where}:{line} names {dotted}" for where, line, dotted in named if not _exists(dotted)]
    assert missing == [], "a message names what a user cannot import: give its public spelling (glyphforge.NAME)"


def test_a_url_that_is_no_entry_says_to_use_glyphforge_find_built():
    with pytest.raises(LookupError, match=r"use glyphforge\.find_built\(kind, data_dir=URL\)$"):
        gf.open_built("https://example.invalid/data")
    assert callable(gf.find_built)
