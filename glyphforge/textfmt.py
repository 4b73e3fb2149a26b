"""Plain-text formatting for the command line: sizes, durations, tables."""
from __future__ import annotations

from collections.abc import Sequence

_UNITS = ("B", "KB", "MB", "GB", "TB")


def human_size(n_bytes: int) -> str:
    """Return ``n_bytes`` as a short decimal size, e.g. ``'12.3 MB'``."""
    size = float(n_bytes)
    for unit in _UNITS:
        if size < 1000 or unit == _UNITS[-1]:
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def count(n: int, noun: str, plural: str | None = None) -> str:
    """Return ``'1 entry'`` / ``'3 entries'``: ``n`` with the noun in the right number."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Return rows as a left-aligned text table with a header and a rule."""
    cells = [[str(cell) for cell in row] for row in [header, *rows]]
    widths = [max(len(row[column]) for row in cells) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
