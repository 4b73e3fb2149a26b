"""Plain-text formatting for the command line: sizes, durations, tables."""
from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

_UNITS = ("B", "KB", "MB", "GB", "TB")
#: The units `parse_size` reads (lower case), in bytes.
_SIZE_UNITS = {"": 1, "b": 1, **{unit: 1000 ** power for power, unit in enumerate(("kb", "mb", "gb", "tb", "pb"), 1)},
               **{unit: 1024 ** power for power, unit in enumerate(("kib", "mib", "gib", "tib", "pib"), 1)}}
#: The largest size `parse_size` takes (what a 64-bit file offset can count).
MAX_SIZE = 2**63 - 1
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", re.IGNORECASE)


def human_size(n_bytes: int) -> str:
    """Return ``n_bytes`` as a short decimal size, e.g. ``'12.3 MB'``."""
    size = float(n_bytes)
    for unit in _UNITS:
        if size < 1000 or unit == _UNITS[-1]:
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def parse_size(size: int | str) -> int:
    """Return the bytes of ``size``: an int, or text such as ``"20GB"``, ``"500 MB"``, ``"1.5TiB"``, ``"1000000"``.

    KB, MB, GB, TB and PB are powers of 1000; KiB, MiB, GiB, TiB and PiB of 1024 (any
    case). A fraction of a byte is dropped. At most `MAX_SIZE` bytes.

    Raises
    ------
    ValueError
        When ``size`` is not a size of 0 to `MAX_SIZE` bytes (the message shows the forms it takes).
    """
    if isinstance(size, int) and not isinstance(size, bool) and 0 <= size <= MAX_SIZE:
        return size
    match = _SIZE.fullmatch(size) if isinstance(size, str) else None
    value = float(match[1]) * _SIZE_UNITS[match[2].lower()] if match and match[2].lower() in _SIZE_UNITS else -1.0
    if not 0 <= value <= MAX_SIZE:  # also inf: a number of hundreds of digits
        raise ValueError(f"{size!r} is not a size: give bytes (1000000) or a number and a unit, such as 500MB, "
                         "20GB or 1.5TiB (KB, MB, GB, TB: powers of 1000; KiB, MiB, GiB, TiB: powers of 1024), "
                         f"at most {MAX_SIZE:,} bytes")
    return int(value)


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


def flat_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Return the parameters that are set (not None, [] or {}), nested dicts flattened to dotted names, by name."""
    flat: dict[str, Any] = {}
    for name, value in sorted(params.items()):
        if isinstance(value, dict):
            flat.update(flat_params(value, f"{prefix}{name}."))
        elif value not in (None, [], {}):
            flat[f"{prefix}{name}"] = value
    return flat


def describe_params(params: Mapping[str, Any], width: int = 60, names: Collection[str] | None = None) -> str:
    """Return one short line of the parameters that are set (of ``names`` only, when given), long lists counted."""
    parts = [f"{name}={f'[{len(value)} items]' if isinstance(value, list) and len(value) > 4 else value}"
             .replace(" ", "") for name, value in flat_params(params).items() if names is None or name in names]
    text = " ".join(parts)
    return text if len(text) <= width else text[: width - 3] + "..."
