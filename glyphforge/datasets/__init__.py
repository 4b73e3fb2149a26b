"""Dataset modules, one per upstream dataset, and the registry that declares them.

``registered()`` lists the datasets (``["backgrounds", "emnist", "fashion-mnist", "kmnist", "mnist",
"omniglot"]``);
`glyphforge.datasets.registry` says what a dataset module provides and how to add one.
"""
from glyphforge.datasets.registry import DatasetRecord, declared, get, register, registered, unregister

__all__ = ["DatasetRecord", "declared", "get", "register", "registered", "unregister"]
