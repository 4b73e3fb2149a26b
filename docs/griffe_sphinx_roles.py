"""A griffe extension for the API reference: Sphinx roles in docstrings shown as inline code, and attributes
documented by their own docstrings.

glyphforge's docstrings cross-reference with Sphinx roles (``:func:`~glyphforge.build```)
and default-role references (`` `~glyphforge.context.DataContext` ``), which Markdown would
show as literal text. Each becomes the inline code a reader of the source sees it as: the
last dotted part after ``~``, the whole target otherwise, the text of ``text <target>``.

An entry documenting several parameters at once (``context, data_dir, mirrors, offline``) is
written as one entry per parameter, each with that description, so that each shows its own type
(griffe gives them all the first one's).

The reference is made by inspection (mkdocs.yml's ``force_inspection``), which gives an
attribute the docstring of its value (``int([x]) -> integer`` for ``seed = 0``): an attribute
gets the docstring written under it in the source instead, or none. Loaded by mkdocs.yml
(mkdocstrings' ``extensions`` option).
"""
from __future__ import annotations

import ast
import inspect
import re
import textwrap
from functools import cache
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|data|meth|attr|mod|exc|obj|const):`([^`]+)`")
#: A default-role reference with a ``~``: `` `~glyphforge.context.DataContext` `` (not inside a ``literal``).
TILDE = re.compile(r"(?<!`)`(~[\w.]+)`(?!`)")


def plain(target: str) -> str:
    """Return the inline code a role's target reads as."""
    if (labelled := re.fullmatch(r"(.+?)\s*<[^>]+>", target)) is not None:
        return f"`{labelled.group(1)}`"
    if target.startswith("~"):
        return f"`{target[1:].rsplit('.', 1)[-1]}`"
    return f"`{target}`"


def one_entry_per_parameter(docstring: str) -> str:
    """Return the numpy-style ``docstring`` with each entry of its Parameters sections that names several
    parameters (``a, b``) written once for each, with its description."""
    lines, out, parameters, at = docstring.split("\n"), [], False, 0
    while at < len(lines):
        line = lines[at]
        if at + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[at + 1]) and line[:1].strip():
            parameters = line.strip() in ("Parameters", "Other Parameters")
        elif parameters and re.fullmatch(r"\w+(?:, *\w+)+", line):
            end = at + 1
            while end < len(lines) and lines[end][:1] in (" ", "\t"):
                end += 1
            out += [part for name in re.split(r", *", line) for part in (name, *lines[at + 1:end])]
            at = end
            continue
        out.append(line)
        at += 1
    return "\n".join(out)


@cache
def written_docstrings(owner: Any) -> dict[str, str]:
    """The docstrings written under the attributes of the class or module ``owner`` in its source, by name."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(owner)))
    except (OSError, TypeError, SyntaxError):  # no source: built in, or made at run time
        return {}
    body = tree.body[0].body if inspect.isclass(owner) and isinstance(tree.body[0], ast.ClassDef) else tree.body
    found = {}
    for statement, following in zip(body, body[1:], strict=False):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target] if isinstance(
            statement, ast.AnnAssign) else []
        if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant) and isinstance(
                following.value.value, str):
            found.update({target.id: inspect.cleandoc(following.value.value) for target in targets
                          if isinstance(target, ast.Name)})
    return found


def value_docstring(obj: griffe.Object, node: Any) -> bool:
    """Whether the inspected attribute ``obj`` (``node``: its runtime value) has its value's type's docstring."""
    if not obj.is_attribute or obj.docstring is None or not isinstance(node, griffe.ObjectNode):
        return False
    return obj.docstring.value.strip() == (inspect.getdoc(type(node.obj)) or "").strip()


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring, for objects visited or inspected alike, and give inspected
    attributes their written docstrings."""

    def on_instance(self, *, obj: griffe.Object, node: Any = None, **kwargs: Any) -> None:
        if value_docstring(obj, node):
            written = written_docstrings(node.parent.obj).get(obj.name) if node.parent is not None else None
            obj.docstring = None if written is None else griffe.Docstring(written, parent=obj)
        if obj.docstring is not None:
            value = ROLE.sub(lambda match: plain(match.group(1)), obj.docstring.value)
            obj.docstring.value = one_entry_per_parameter(TILDE.sub(lambda match: plain(match.group(1)), value))
