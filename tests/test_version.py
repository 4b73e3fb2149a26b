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


#: The cache formats each version writes, newest last. A cache-format change (an entry's layout, a key's ingredients,
#: the bytes written for the same data) bumps the version: see docs/contributing.md, "Versions and the CHANGELOG".
CACHE_FORMATS = {
    "0.4.0.dev0": {
        "glyphforge.cache.keys.FORMAT_VERSION": 4,
        "glyphforge.builds.making.spec.BUILD_FORMAT": 3,
        "glyphforge.scenes.spec.ALGORITHM_VERSION": 4,
        "the decoded copy's files": ["checks.json", "images.crc32.npy", "images.npy"],
        "the decoded copy's record": ["arrays", "files", "key"],
        "the decoded copy's record of an array": ["crc32", "offset", "row_nbytes", "rows", "sums_crc32"],
    },
    "0.5.0.dev0": {
        "glyphforge.cache.keys.FORMAT_VERSION": 4,
        "glyphforge.builds.making.spec.BUILD_FORMAT": 4,
        "glyphforge.cache.declared.BLOCK_BYTES": 1 << 20,
        "glyphforge.scenes.spec.ALGORITHM_VERSION": 4,
        "the decoded copy's files": ["checks.json", "images.crc32.npy", "images.npy"],
        "the decoded copy's record": ["arrays", "files", "key"],
        "the decoded copy's record of an array": ["crc32", "offset", "row_nbytes", "rows", "sums_crc32"],
    },
}


def _cache_formats(folder: Path) -> dict[str, object]:
    """The cache formats this glyphforge writes (a decoded copy of one tiny array recorded in ``folder``)."""
    import json

    import numpy as np

    from glyphforge.builds.decoded_copy.life import RECORD, record_copy
    from glyphforge.builds.making.spec import BUILD_FORMAT
    from glyphforge.cache.declared import BLOCK_BYTES
    from glyphforge.cache.keys import FORMAT_VERSION
    from glyphforge.scenes.spec import ALGORITHM_VERSION

    np.save(folder / "images.npy", np.zeros((3, 2, 2), np.uint8))
    record_copy(folder, "0" * 64, ["images"])
    record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    return {
        "glyphforge.cache.keys.FORMAT_VERSION": FORMAT_VERSION,
        "glyphforge.builds.making.spec.BUILD_FORMAT": BUILD_FORMAT,
        "glyphforge.cache.declared.BLOCK_BYTES": BLOCK_BYTES,  # a shard's blocks: readers derive their rows from it
        "glyphforge.scenes.spec.ALGORITHM_VERSION": ALGORITHM_VERSION,
        "the decoded copy's files": sorted(path.name for path in folder.iterdir()),
        "the decoded copy's record": sorted(record),
        "the decoded copy's record of an array": sorted(record["arrays"]["images"]),
    }


def test_a_cache_format_change_bumps_the_version(tmp_path):
    assert __version__ in CACHE_FORMATS, (
        f"glyphforge {__version__} has no cache formats recorded: add them to CACHE_FORMATS (tests/test_version.py)")
    recorded, current = CACHE_FORMATS[__version__], _cache_formats(tmp_path)
    changed = sorted(name for name in current if current[name] != recorded.get(name))
    assert not changed, (
        f"the cache format changed ({', '.join(changed)}) but the version is still {__version__}: bump the version in "
        "glyphforge/_version.py and write the CHANGELOG line (what it means for an existing cache), then record the "
        "new formats under the new version in CACHE_FORMATS (docs/contributing.md, 'Versions and the CHANGELOG')")
    assert list(CACHE_FORMATS)[-1] == __version__, "the newest formats recorded are the current version's"
