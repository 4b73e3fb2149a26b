"""One error root: every error glyphforge defines is a `GlyphforgeError`, and keeps its builtin base.

The classes and the ``raise`` statements are found by parsing every module (nothing is missed
because it is not imported); each class is then imported, and its bases checked on the class
itself. A few private exceptions steer control flow inside one module and never reach a user:
:data:`INTERNAL` lists them, with the modules that may raise them.
"""
from __future__ import annotations

import ast
import errno
import importlib
import pickle
from pathlib import Path

import pytest

import glyphforge
from glyphforge import errors

PACKAGE_DIR = Path(glyphforge.__file__).resolve().parent

#: Exceptions outside the root, ``"module.Class"``: the modules that raise them (and catch them all).
INTERNAL: dict[str, tuple[str, ...]] = {
    # a store's failure sorted into "try again" or not, by the backends; Backend.retried turns each into a
    # RemoteReadError
    **{f"glyphforge.storage.read_failures._{name}": (
        "glyphforge.storage.backend", "glyphforge.storage.fsspec_backend", "glyphforge.storage.http_backend")
       for name in ("Transient", "Permanent", "Short")},
    # a missing bucket found out, turned into a RemoteFileMissingError
    "glyphforge.storage.fsspec_backend._NoBucket": ("glyphforge.storage.fsspec_backend",),
    # one source of a download failed (the next is tried), or is to be tried again; download.py ends
    # them all as a DownloadError
    "glyphforge.pipelines.http_source._SourceFailed": ("glyphforge.pipelines.http_source",
                                                      "glyphforge.pipelines.download",
                                                      "glyphforge.pipelines.sources"),
    "glyphforge.pipelines.http_source._Retryable": ("glyphforge.pipelines.http_source",),
}

#: Each error (by class name: it may move between modules) and the builtin base(s) it had before the root
#: existed, which it keeps.
BUILTIN_BASES: dict[str, tuple[type[BaseException], ...]] = {
    "DataDirAccessError": (PermissionError,),
    "SpecError": (ValueError,),
    "SourcesChangedError": (RuntimeError,),
    "ShardError": (RuntimeError,),
    "DatasetTooLargeError": (MemoryError,),
    "DamagedShardsError": (ValueError,),
    "ExportTargetError": (FileExistsError,),
    "ExportFormatError": (ValueError,),
    "ViewRequestError": (ValueError,),
    "DamagedIndexError": (ValueError,),
    "NotEnoughSpaceError": (OSError,),
    "UnlistableDataDirError": (LookupError, ValueError),
    "ReadOnlyStoreError": (ValueError,),
    "OwnCopyRemoteError": (ValueError,),
    "ForeignStateError": (ValueError,),
    "DamagedCopyError": (OSError,),
    "DamagedCompanionError": (OSError,),
    "ForeignCopyError": (OSError,),
    "LockTimeoutError": (TimeoutError,),
    "AmbiguousKindError": (LookupError,),
    "DamagedManifestError": (ValueError,),
    "DamagedPklzError": (ValueError,),
    "MemberMismatchError": (ValueError,),
    "UnsafePickleError": (pickle.UnpicklingError,),
    "OversizedPickleError": (pickle.UnpicklingError,),
    "MissingEntryFileError": (FileNotFoundError,),
    "DamagedEntryFileError": (ValueError,),
    "UnreadableEntryError": (PermissionError,),
    "CleanupError": (OSError,),
    "UsageError": (ValueError,),
    "EMNISTFormatError": (ValueError,),
    "MNISTFormatError": (ValueError,),
    "OmniglotFormatError": (ValueError,),
    "StorageError": (OSError,),
    "ArchiveError": (ValueError,),
    "ImageDecodeError": (ValueError,),
    "DownloadError": (RuntimeError,),
    "HashMismatchError": (RuntimeError,),
    "MissingFilesError": (RuntimeError,),
    "IDXError": (ValueError,),
    "SessionError": (RuntimeError,),
    "TaskFailure": (RuntimeError,),
    "TaskError": (RuntimeError,),
    "WorkerDiedError": (RuntimeError,),
    "NoWorkersError": (RuntimeError,),
    "WorkerStartError": (RuntimeError,),
    "MainGuardError": (RuntimeError,),
    "LocalSourceError": (ValueError,),
    "PublishConflictError": (FileExistsError,),
    "RemoteReadError": (OSError,),
    "ShortObjectError": (OSError,),
    "RemoteFileMissingError": (FileNotFoundError,),
    "RemoteAccessError": (PermissionError,),
    "DamagedRemoteEntryError": (ValueError,),
    "RemoteStorageError": (OSError,),
    "UnsupportedURLError": (ValueError,),
    "MalformedURLError": (ValueError,),
    "MissingExtraError": (ImportError,),
}

#: The families, each a `GlyphforgeError` and public as ``glyphforge.NAME``.
FAMILIES = ("ArgumentError", "IntegrityError", "StorageError", "AccessError", "DownloadError", "BuildError")


def module_name(path: Path) -> str:
    parts = ["glyphforge", *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
           for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def defined_classes() -> dict[str, type]:
    """Every class the package defines, ``"module.Class"``: found in the source, then imported."""
    found = {}
    for module, tree in MODULES.items():
        top = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                assert node.name in top, f"{module}.{node.name} is defined inside a function or class: define it " \
                                         "at the module's top level, where this test can check it"
                found[f"{module}.{node.name}"] = getattr(importlib.import_module(module), node.name)
    return found


CLASSES = defined_classes()
EXCEPTIONS = {name: cls for name, cls in CLASSES.items() if issubclass(cls, BaseException)}
BY_NAME = {cls.__name__: cls for cls in EXCEPTIONS.values()}


def _resolve(expression: ast.expr, namespace: object) -> object:
    """The object a name or dotted name in a module stands for (None when it is not a global of the module)."""
    if isinstance(expression, ast.Name):
        return getattr(namespace, expression.id, None)
    if isinstance(expression, ast.Attribute):
        owner = _resolve(expression.value, namespace)
        return None if owner is None else getattr(owner, expression.attr, None)
    return None


def raised_classes() -> list[tuple[str, int, type]]:
    """``(module, line, class)`` for each glyphforge exception class a ``raise`` names (``raise X(...)``, ``raise X``).

    A name is looked up among the module's globals (a ``raise`` of an instance made elsewhere names none).
    """
    found = []
    for module, tree in MODULES.items():
        namespace = importlib.import_module(module)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            for part in ast.walk(raised):  # also `raise (A if short else B)(...)`
                value = _resolve(part, namespace) if isinstance(part, ast.Name | ast.Attribute) else None
                if isinstance(value, type) and issubclass(value, BaseException) and \
                        value.__module__.startswith("glyphforge"):
                    found.append((module, node.lineno, value))
    return found


def qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_exception_glyphforge_defines_is_a_glyphforge_error():
    assert len(EXCEPTIONS) > 50  # the source was found and parsed
    assert len(BY_NAME) == len(EXCEPTIONS), "two exception classes share a name: a user could not tell them apart"
    outside = sorted(name for name, cls in EXCEPTIONS.items()
                     if not issubclass(cls, errors.GlyphforgeError) and name not in INTERNAL)
    assert outside == [], "derive each from a family of glyphforge.errors (keeping its builtin base as a second " \
                          "parent), or list it in INTERNAL when it never leaves its module"


def test_every_exception_outside_the_root_is_a_private_signal():
    public = sorted(name for name, cls in EXCEPTIONS.items()
                    if not issubclass(cls, errors.GlyphforgeError) and not cls.__name__.startswith("_"))
    assert public == [], "name a control-flow signal with a leading underscore: it never reaches a user"


def test_the_internal_exceptions_exist_stay_outside_and_are_raised_only_where_listed():
    assert set(INTERNAL) <= set(EXCEPTIONS), "strike the gone ones off INTERNAL"
    assert not [name for name in INTERNAL if issubclass(EXCEPTIONS[name], errors.GlyphforgeError)]
    misplaced = [f"{module}:{line} raises {qualified(cls)}" for module, line, cls in raised_classes()
                 if qualified(cls) in INTERNAL and module not in INTERNAL[qualified(cls)]]
    assert misplaced == [], "an internal exception may reach a user from here: raise a glyphforge error instead"


def test_every_raise_of_a_glyphforge_exception_raises_a_glyphforge_error():
    raised = raised_classes()
    names = {cls.__name__ for _, _, cls in raised}
    assert {"CleanupError", "UsageError", "RemoteReadError", "ShortObjectError"} <= names  # `(A if c else B)(...)`
    wrong = [f"{module}:{line} raises {qualified(cls)}" for module, line, cls in raised
             if not issubclass(cls, errors.GlyphforgeError) and qualified(cls) not in INTERNAL]
    assert wrong == []


@pytest.mark.parametrize("name", sorted(BUILTIN_BASES))
def test_each_error_keeps_its_builtin_base(name):
    cls = BY_NAME[name]
    assert issubclass(cls, errors.GlyphforgeError)
    for base in BUILTIN_BASES[name]:
        assert issubclass(cls, base), f"`except {base.__name__}` no longer catches {name}"


def test_every_error_is_listed_with_its_builtin_base():
    roots = {name for name, value in vars(errors).items() if isinstance(value, type)}  # no builtin base to keep
    unlisted = sorted(set(BY_NAME) - set(BUILTIN_BASES) - {name.rpartition(".")[2] for name in INTERNAL} - roots)
    assert unlisted == [], "add each to BUILTIN_BASES with the builtin error it is also"


def test_the_families_are_public_and_under_the_root():
    for name in ("GlyphforgeError", *FAMILIES):
        family = getattr(glyphforge, name)
        assert issubclass(family, errors.GlyphforgeError) and name in glyphforge.__all__, name
    assert glyphforge.StorageError is errors.StorageError and issubclass(errors.StorageError, OSError)
    assert issubclass(glyphforge.HashMismatchError, glyphforge.DownloadError)
    assert issubclass(glyphforge.HashMismatchError, glyphforge.IntegrityError)  # a file that lies: two families
    assert issubclass(glyphforge.SpecError, glyphforge.ArgumentError) and issubclass(glyphforge.SpecError,
                                                                                     glyphforge.BuildError)
    assert issubclass(glyphforge.DataDirAccessError, glyphforge.AccessError)


def test_except_catches_by_family_and_by_builtin():
    from glyphforge.cache.pklz import DamagedPklzError
    from glyphforge.storage.reads import RemoteAccessError

    for error, family, builtin in [(RemoteAccessError("HTTP 403"), errors.AccessError, PermissionError),
                                   (DamagedPklzError("truncated"), errors.IntegrityError, ValueError),
                                   (glyphforge.SpecError("bad count"), errors.ArgumentError, ValueError)]:
        for catch in (errors.GlyphforgeError, family, builtin):
            try:
                raise error
            except catch as caught:
                assert caught is error


def test_the_errors_module_imports_nothing_of_glyphforge():
    imported = [node for node in ast.walk(MODULES["glyphforge.errors"])
                if isinstance(node, ast.Import | ast.ImportFrom)]
    assert [ast.unparse(node) for node in imported] == ["from __future__ import annotations"]


# -- every error pickles whole (issue 42, row 9) --------------------------------------------------
def _made_as_raised() -> dict[str, object]:
    """Each error with an `__init__` of its own (or an ``OSError`` made with an errno), made as it is raised."""
    from glyphforge.cache.locks import Holder
    from glyphforge.pipelines.http_source import Attempt
    from glyphforge.pipelines.resource import Resource

    resource = Resource("emnist", "gzip.zip", "https://example.org/gzip.zip", "sha256:" + "0" * 64, 12)
    attempts = (Attempt("https://example.org/gzip.zip", "HTTP 404"),)
    made = {
        "DamagedCopyError": (Path("/c/images.npy"), "differs from its checksum", (12, 34)),
        "DamagedShardsError": ("shards lost", Path("/c/arrays.pklz"), 10, 20),
        "DamagedEntryFileError": ("is not its size", Path("/c/arrays.pklz"), 10, 20),
        "DamagedIndexError": ("/c/arrays.pklz", "its index is cut", "build it again"),
        "ShardError": (3, "shard 3 failed"),
        "CleanupError": ("could not remove /c/x", [Path("/c/y")]),
        "DamagedCompanionError": (Path("/c/checks.json"), "is not JSON"),
        "MemberMismatchError": (2, "member 2 differs"),
        "TaskError": (4, "Traceback ...\nValueError: bad", "ValueError: bad"),
        "TaskFailure": (4, "it failed"),
        "WorkerDiedError": (4, "killed by SIGKILL"),
        "RemoteFileMissingError": ("s3://b/x is missing", True),
        **{name: (errno.EACCES, f"{name}: this user may not read /d", "/d")
           for name in ("DataDirAccessError", "UnreadableEntryError")},
        "MissingEntryFileError": (errno.ENOENT, "/c/arrays.pklz is missing: remove the entry", "/c/arrays.pklz"),
    }
    errors_made = {name: BY_NAME[name](*args) for name, args in made.items()}
    keywords = dict(resource=resource, target=Path("/raw/gzip.zip"), mirrors=("https://m.example",),
                    attempts=attempts)
    errors_made |= {name: BY_NAME[name]("gzip.zip could not be fetched", **keywords)
                    for name in ("DownloadError", "HashMismatchError")}
    errors_made["MissingFilesError"] = BY_NAME["MissingFilesError"]("2 files missing", [errors_made["DownloadError"]])
    errors_made["LockTimeoutError"] = BY_NAME["LockTimeoutError"]("lock held too long", lock_path=Path("/c/.lock"),
                                                                  holder=Holder(12, "host", "2026-01-01T00:00:00Z"))
    return errors_made


ROOTED = sorted(name for name, cls in BY_NAME.items() if issubclass(cls, errors.GlyphforgeError))


def _made(name: str) -> BaseException:
    made = _made_as_raised()
    if name in made:
        return made[name]
    error = BY_NAME[name](f"{name}: what went wrong, and what to do")
    if isinstance(error, OSError):  # an errno and a file set after, as glyphforge converts an OSError
        error.errno, error.filename = errno.EIO, "/c/file"
    error.__notes__ = ["a note"]
    return error


def _whole(error: BaseException) -> tuple:
    """What a user reads of an error: its class, text, args and attributes (an ``OSError``'s errno and file too)."""
    attributes = {name: (value if not isinstance(value, BaseException) else _whole(value))
                  for name, value in vars(error).items()}
    attributes |= {name: [_whole(item) for item in value] for name, value in attributes.items()
                   if isinstance(value, tuple | list) and value and isinstance(value[0], BaseException)}
    os_fields = (error.errno, error.strerror, error.filename) if isinstance(error, OSError) else ()
    return type(error), str(error), error.args, attributes, os_fields


@pytest.mark.parametrize("name", ROOTED)
def test_every_error_pickles_with_its_text_class_and_attributes(name):
    assert len(ROOTED) > 55
    error = _made(name)
    assert str(error) and str(error) != "None"
    assert _whole(pickle.loads(pickle.dumps(error))) == _whole(error)


@pytest.mark.parametrize("name", ROOTED)
def test_every_error_re_raised_from_its_text_alone_keeps_it(name):
    """torch's DataLoader re-raises a worker's error as ``type(error)(text)``; an error that cannot be made so
    becomes a RuntimeError of that text (torch's fallback): either way the text is what the user reads."""
    text = f"Caught {name} in DataLoader worker process 0.\nOriginal Traceback: ... what went wrong"
    try:
        error = BY_NAME[name](text)
    except TypeError:
        return
    assert str(error) == text
