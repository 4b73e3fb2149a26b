"""torchvision's spellings of the map-style datasets' arguments: ``root``, ``train`` and ``background``.

``MNIST(root, train=True, transform=None, target_transform=None, download=None)`` (and
``FashionMNIST``, ``KMNIST``, ``EMNIST(root, split, train=...)``, ``Omniglot(root,
background=True)``) mean what they mean in torchvision: ``root`` is the data dir,
``train`` chooses the train (True) or test (False) subset and Omniglot's ``background``
its background (True) or evaluation (False) set; ``download=False`` never downloads. Each
sits beside glyphforge's own keyword (``data_dir``; ``subset``, and Omniglot's ``sets``),
and the rule when both are given is one: a ValueError naming both.
"""
from __future__ import annotations

from typing import Any

from glyphforge._checks import PathLike

#: The subset names of the map-style datasets, which a ``root`` may not be (``"./train"`` may).
SUBSET_NAMES = ("all", "train", "test")


def data_dir_of(root: PathLike | None, data_dir: PathLike | None) -> PathLike | None:
    """Return the data dir given as torchvision's ``root`` or glyphforge's ``data_dir`` (None: neither), or raise."""
    if root is not None and data_dir is not None:
        raise ValueError(f"give root={str(root)!r} (torchvision's name) or data_dir={str(data_dir)!r}, not both: "
                         "both name the data dir")
    if isinstance(root, str) and root in SUBSET_NAMES:
        raise ValueError(f"root {root!r} is a subset's name, but the first argument is torchvision's root, the data "
                         f"dir: give subset={root!r} (or the directory as './{root}')")
    return data_dir if root is None else root


def subset_of(flag_name: str, flag: Any, subset: str | None, default: str, chosen: dict[bool, str]) -> str:
    """Return the subset given as torchvision's boolean ``flag_name`` (``chosen[flag]``) or as ``subset``, or raise.

    Neither given: ``default``. Both given: a ValueError naming both.
    """
    if flag is None:
        return default if subset is None else subset
    if subset is not None:
        raise ValueError(f"give {flag_name}={flag!r} (torchvision's name) or subset={subset!r}, not both")
    if not isinstance(flag, bool):
        raise ValueError(f"{flag_name} must be True or False (torchvision's meaning), not {flag!r}: or give "
                         f"subset= one of {', '.join(SUBSET_NAMES)}")
    return chosen[flag]
