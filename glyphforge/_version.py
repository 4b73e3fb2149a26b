"""The package version, in a module of its own so that any module may import it without a cycle.

Between releases it names unreleased development (``X.Y.Z.devN``), and the CHANGELOG's newest
section is ``Unreleased (X.Y.Z.devN)``. A cache-format change bumps it: when an entry's layout,
a key's ingredients or the bytes written for the same data change (``FORMAT_VERSION``,
``BUILD_FORMAT``, ``ALGORITHM_VERSION``, the decoded copy's record), raise this version, say in the
CHANGELOG what the change means for an existing cache, and record the new formats under the new
version in ``tests/test_version.py`` (which fails until then).
"""

__version__ = "0.5.0.dev0"
