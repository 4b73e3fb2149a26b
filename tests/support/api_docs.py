"""Reading the built API reference (tests/test_docs.py): its signature blocks, the objects they document, the text.

A rendered signature and ``inspect.signature`` are compared as parsed: each parameter's name, kind, annotation
and default as Python source normalised by `ast` (so ``"train"`` and ``'train'`` are one default).
"""
from __future__ import annotations

import ast
import html
import importlib
import inspect
import re
from typing import Any

#: The first line of the docstring of each builtin type an attribute's value may have: an attribute documented
#: by one is an attribute without its own docstring, inspected (its value's type's docstring shown instead).
BUILTIN_DOCSTRINGS = tuple(inspect.getdoc(kind).splitlines()[0]  # type: ignore[union-attr]
                           for kind in (int, float, complex, str, bytes, bool, tuple, list, dict, set, frozenset))

_SIGNATURE = re.compile(r'<h(\d) id="([^"]+)" class="doc doc-heading">(?:(?!</?h\d).)*</h\1>\s*'
                        r'<div class="doc-signature highlight"><pre><span></span><code>(.*?)</code></pre>', re.DOTALL)
_HEADING = re.compile(r'<h\d id="([^"]+)" class="doc doc-heading">')
_PARAMETERS = re.compile(r'<span class="doc-section-title">Parameters:</span>.*?</table>', re.DOTALL)
_ROW = re.compile(r'<tr class="doc-section-item">\s*<td>\s*<code>(\w+)</code>\s*</td>\s*<td>(.*?)</td>', re.DOTALL)
_KINDS = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD")
#: How both show a dataclass field's default made by its ``default_factory``, and a name parsing it.
_FACTORY, _FACTORY_NAME = "<factory>", "__factory__"
#: ``(name, kind, annotation, default)`` of each parameter, then the return annotation (None: not given).
Described = tuple[list[tuple[str, str, str | None, str | None]], str | None]


def text(page: str) -> str:
    """The text of an HTML page: tags dropped, entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def signatures(page: str) -> list[tuple[str, str]]:
    """``(dotted path, rendered signature)`` of each object of an API page that shows a signature."""
    return [(match.group(2), text(match.group(3))) for match in _SIGNATURE.finditer(page)]


def parameter_types(page: str) -> list[tuple[str, str, str]]:
    """``(dotted path, parameter, type shown)`` of each row of the Parameters tables of an API page."""
    found = []
    starts = list(_HEADING.finditer(page))
    for start, end in zip(starts, [*starts[1:], None], strict=True):
        block = page[start.end():None if end is None else end.start()]
        for table in _PARAMETERS.finditer(block):
            found += [(start.group(1), row.group(1), text(row.group(2)).strip())
                      for row in _ROW.finditer(table.group())]
    return found


def shown_type(shown: str) -> str | None:
    """A type shown in a Parameters table, as comparable source text (None: none shown)."""
    return _source(shown) if shown else None


def annotation(signature: inspect.Signature, name: str) -> str | None:
    """The annotation of parameter ``name`` of ``signature`` as comparable source text (None: none)."""
    return _annotation(signature.parameters[name].annotation)


def runtime_signature(path: str) -> inspect.Signature | None:
    """``inspect.signature`` of the object at the dotted ``path`` as the reference shows it (a method without its
    ``self``), or None for what has no call signature (an attribute, a property)."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        break
    owner = None
    for name in parts[split:]:
        owner, found = found, getattr(found, name)
    if not callable(found):
        return None
    if inspect.isclass(owner) and inspect.isfunction(inspect.getattr_static(owner, parts[-1])):
        signature = inspect.signature(found)
        return signature.replace(parameters=list(signature.parameters.values())[1:])
    signature = inspect.signature(found)
    return signature.replace(return_annotation=inspect.Signature.empty) if inspect.isclass(found) else signature


def _source(code: str | None) -> str | None:
    if code is None:
        return None
    try:
        return ast.unparse(ast.parse(code.strip(), mode="eval"))
    except SyntaxError:
        return code.strip()


def _annotation(annotation: Any) -> str | None:
    if annotation is inspect.Parameter.empty:
        return None
    return _source(annotation if isinstance(annotation, str) else inspect.formatannotation(annotation))


def described(signature: inspect.Signature) -> Described:
    """``signature`` as comparable source text."""
    return ([(parameter.name, parameter.kind.name, _annotation(parameter.annotation),
              None if parameter.default is inspect.Parameter.empty else _source(repr(parameter.default)))
             for parameter in signature.parameters.values()], _annotation(signature.return_annotation))


def parsed(rendered: str) -> Described:
    """A rendered signature (``name(a: int = 0, *, b) -> str``) as comparable source text."""
    function = ast.parse(f"def {rendered.strip().replace(_FACTORY, _FACTORY_NAME)}: pass").body[0]
    assert isinstance(function, ast.FunctionDef)
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    given = [(argument, _KINDS[0 if index < len(arguments.posonlyargs) else 1], default)
             for index, (argument, default) in enumerate(zip(positional, defaults, strict=True))]
    given += [(arguments.vararg, _KINDS[2], None)] if arguments.vararg else []
    given += [(argument, _KINDS[3], default) for argument, default in zip(arguments.kwonlyargs,
                                                                           arguments.kw_defaults, strict=True)]
    given += [(arguments.kwarg, _KINDS[4], None)] if arguments.kwarg else []
    return ([(argument.arg, kind, None if argument.annotation is None else ast.unparse(argument.annotation),
              None if default is None else ast.unparse(default).replace(_FACTORY_NAME, _FACTORY))
             for argument, kind, default in given],
            None if function.returns is None else ast.unparse(function.returns))
