"""Which entry a kind names: its only entry, or its newest when asked for explicitly (``"KIND:newest"``).

A script calling ``find_built("scenes")`` must not go on with another dataset because
someone built a second scenes dataset into the same data dir. So a kind with several
entries is an `AmbiguousKindError` listing them (key, size, when built, the parameters
that tell them apart); the caller gives a key (prefix), or asks for the newest with the
target ``"scenes:newest"``. The rule is the same in a data dir on disk and at a URL
(`glyphforge.find_built`), and for the CLI commands taking a target.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from glyphforge.cache.manifest import ManifestFields
from glyphforge.errors import ArgumentError
from glyphforge.textfmt import describe_params, flat_params, human_size, table

#: What a target ends with to ask for the newest entry of its kind.
NEWEST = ":newest"
#: Parameters shown for every entry listed, besides those that differ between them.
SHOWN_ALWAYS = ("n_examples", "seed")

E = TypeVar("E", bound=ManifestFields)


class AmbiguousKindError(ArgumentError, LookupError):
    """A kind names several entries: the message lists them, and says to give a key or ``KIND:newest``."""


def split_target(target: str) -> tuple[str, bool]:
    """Return ``(kind, True)`` for the target ``"KIND:newest"``, else ``(target, False)``."""
    if target.endswith(NEWEST):
        return target[:-len(NEWEST)], True
    return target, False


def of_kind(target: str, entries: Sequence[E], where: object) -> E | None:
    """Return the entry of ``entries`` the kind ``target`` names: its only one, or for ``"KIND:newest"`` its newest.

    Parameters
    ----------
    target
        What the caller gave: a kind, ``"KIND:newest"``, or something else (a key).
    entries
        The entries to choose from (of any kinds).
    where
        The store holding them, for the message.

    Returns
    -------
    ManifestFields or None
        None when no entry is of that kind (``target`` is no kind, or one not made there).

    Raises
    ------
    AmbiguousKindError
        Several entries are of that kind, and the newest was not asked for.
    """
    kind, newest = split_target(target)
    found = sorted((entry for entry in entries if entry.kind == kind),
                   key=lambda entry: str(entry.manifest.get("created", "")))
    if newest or len(found) < 2:
        return found[-1] if found else None
    raise AmbiguousKindError(
        f"{kind!r} names {len(found)} entries in {where}, so it does not say which one (a script that took the "
        f"newest would go on with another dataset, without a word, once someone builds one more). Give the key "
        f"(a prefix of 6+ characters) of the one you mean, e.g. {found[-1].key[:12]}, or ask for the newest "
        f"explicitly with {kind + NEWEST!r}:\n{listing(found)}")


def listing(entries: Sequence[ManifestFields]) -> str:
    """A table of ``entries``: key, size, when built, and their parameters that differ (with `SHOWN_ALWAYS`)."""
    flat = [flat_params(entry.params) for entry in entries]
    names = set(SHOWN_ALWAYS) | {name for params in flat for name in params
                                 if any(other.get(name) != params[name] for other in flat)}
    return table(["key", "size", "built", "parameters"],
                 [[entry.key[:12], human_size(entry.size_bytes), entry.manifest.get("created", "?"),
                   describe_params(entry.params, 100, names)] for entry in entries])
