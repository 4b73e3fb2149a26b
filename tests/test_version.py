"""One version string, in ``glyphforge/_version.py``: the package, its metadata and the CHANGELOG agree."""
from __future__ import annotations

import re
from pathlib import Path

import glyphforge
from glyphforge._version import __version__

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_written_once_and_the_changelog_names_it():
    assert glyphforge.__version__ == __version__
    assert "version = attr: glyphforge._version.__version__" in (ROOT / "setup.cfg").read_text().splitlines()
    assigned = [path.relative_to(ROOT).as_posix() for path in sorted((ROOT / "glyphforge").rglob("*.py"))
                if re.search(r"^__version__\s*=", path.read_text(encoding="utf-8"), re.MULTILINE)]
    assert assigned == ["glyphforge/_version.py"]
    newest = next(line for line in (ROOT / "CHANGELOG.md").read_text().splitlines() if line.startswith("## "))
    assert re.search(rf"\b{re.escape(__version__)}\b", newest), (newest, __version__)
