"""Every ``GLYPHFORGE_*`` variable is read in `glyphforge.config` only (issue 44).

What needs a setting calls its function in config with what it was given (``config.data_dir_setting(data_dir)``);
no other module reads ``os.environ`` for a glyphforge variable, names one in a string that is not a message,
or calls a config function that reads a variable it is told (``size_from_env(name)``, ``data_dir_from_env()``).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import glyphforge
from glyphforge import config

PACKAGE = Path(glyphforge.__file__).parent
#: A glyphforge variable's name, or a part of one a name could be assembled from ("GLYPHFORGE_" + "DATA_DIR").
VARIABLE_PART = re.compile(r"GLYPHFORGE(_[A-Z_]*)?")
#: Reads of the environment by a name that is not a string written there: ``{module: why}``.
OTHER_VARIABLES = {"storage/store_errors.py": "the provider's secrets (SECRET_VARIABLES), starred out of messages"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [(path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(), str(path)))
            for path in sorted(PACKAGE.rglob("*.py")) if path.name != "config.py" or path.parent != PACKAGE]


def _is_environ(node: ast.AST) -> bool:
    """``os.environ``, ``environ``, ``os.environb``, ``os.getenv`` or ``getenv``."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    return name in ("environ", "environb", "getenv")


def _environment_keys(tree: ast.Module) -> list[ast.expr]:
    """The keys of every read of the environment in ``tree``: ``environ[key]``, ``environ.get(key)``,
    ``getenv(key)``, ``key in environ`` (a read without a key, such as ``dict(os.environ)``, gives the node)."""
    keys: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            keys.append(node.slice)
        elif isinstance(node, ast.Call) and _is_environ(node.func):
            keys.extend(node.args[:1])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_environ(node.func.value):
            keys.extend(node.args[:1] or [node])
        elif isinstance(node, ast.Compare) and any(_is_environ(side) for side in node.comparators):
            keys.append(node.left)
    return keys


def test_no_module_but_config_reads_a_glyphforge_variable():
    reads = []
    for module, tree in _modules():
        for key in _environment_keys(tree):
            literal = isinstance(key, ast.Constant) and isinstance(key.value, str)
            if (literal and VARIABLE_PART.match(key.value)) or (not literal and module not in OTHER_VARIABLES):
                reads.append(f"{module}:{key.lineno}: reads the environment by {ast.unparse(key)}")
    assert not reads, "read them through glyphforge.config's settings:\n" + "\n".join(reads)


def test_no_module_but_config_names_a_glyphforge_variable_outside_a_message():
    """A string that is a variable's name, or a part of one, is a read being assembled (messages are sentences)."""
    found = [f"{module}:{node.lineno}: {node.value!r}" for module, tree in _modules() for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE_PART.fullmatch(node.value)]
    assert not found, "\n".join(found)


def test_no_module_calls_a_config_reader_of_a_variable_it_names():
    """Config's readers take what was given, never a variable: the rule of each setting stays in config."""
    readers = {name for name in dir(config) if "env" in name.lower() and callable(getattr(config, name))}
    calls = []
    for module, tree in _modules():
        for node in ast.walk(tree):
            called = node.func if isinstance(node, ast.Call) else None
            name = called.attr if isinstance(called, ast.Attribute) else called.id if isinstance(called, ast.Name) \
                else None
            if name in readers or (name or "").endswith("_from_env"):
                calls.append(f"{module}:{node.lineno}: {name}()")
    assert not calls, "call config's settings (data_dir_setting(given), mirror_setting(given), ...):\n" + \
        "\n".join(calls)


def test_every_variable_config_names_is_read_by_one_of_its_settings(monkeypatch, tmp_path):
    """The seven variables, each set, change what config's settings return (so the readers above are the reads)."""
    variables = sorted(value for name, value in vars(config).items() if name.startswith("ENV_"))
    assert len(variables) == 7
    settings = {
        config.ENV_DATA_DIR: lambda: config.data_dir_setting(),
        config.ENV_MIRROR: lambda: config.mirror_setting(),
        config.ENV_OFFLINE: lambda: config.offline_setting(),
        config.ENV_LOCK_TIMEOUT: lambda: config.lock_timeout(),
        config.ENV_CACHE_DIR: lambda: config.local_cache_dir(),
        config.ENV_DECODED_BUDGET: lambda: config.decoded_budget_setting(),
        config.ENV_CACHE_SIZE: lambda: config.cache_size_setting(),
    }
    assert sorted(settings) == variables
    values = {config.ENV_OFFLINE: "1", config.ENV_LOCK_TIMEOUT: "7", config.ENV_DECODED_BUDGET: "5MB",
              config.ENV_CACHE_SIZE: "5MB"}
    for variable in variables:
        monkeypatch.delenv(variable, raising=False)
    for variable, setting in settings.items():
        unset = setting()
        monkeypatch.setenv(variable, values.get(variable, str(tmp_path / "set")))
        assert setting() != unset, variable
        monkeypatch.delenv(variable)
