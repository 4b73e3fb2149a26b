"""Reusable preparation steps: download, archives, IDX, decoding, numba kernels."""
