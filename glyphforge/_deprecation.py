"""One helper for the spellings kept for one release with a DeprecationWarning (see CHANGELOG.md)."""
from __future__ import annotations

import warnings

#: The release in which the deprecated spellings listed in CHANGELOG.md stop working.
REMOVED_IN = "0.3"


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new`` (both written as the user writes them)."""
    warnings.warn(
        f"{old} is deprecated and stops working in glyphforge {REMOVED_IN}; use {new} instead",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
