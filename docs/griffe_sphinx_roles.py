"""A griffe extension for the API reference: Sphinx roles in docstrings shown as inline code.

glyphforge's docstrings cross-reference with Sphinx roles (``:func:`~glyphforge.build```),
which Markdown would show as literal text. Each becomes the inline code a reader of the
source sees it as: the last dotted part after ``~``, the whole target otherwise, the text
of ``text <target>``. Loaded by mkdocs.yml (mkdocstrings' ``extensions`` option).
"""
from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|data|meth|attr|mod|exc|obj|const):`([^`]+)`")


def plain(target: str) -> str:
    """Return the inline code a role's target reads as."""
    if (labelled := re.fullmatch(r"(.+?)\s*<[^>]+>", target)) is not None:
        return f"`{labelled.group(1)}`"
    if target.startswith("~"):
        return f"`{target[1:].rsplit('.', 1)[-1]}`"
    return f"`{target}`"


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring, for objects visited or inspected alike."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(lambda match: plain(match.group(1)), obj.docstring.value)
