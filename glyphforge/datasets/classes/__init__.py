"""Per-class datasets: one uint8 file per class in one cache entry per (config, shape), read by selection.

A per-class dataset is a `declaration.Declaration` (its configs, classes, upstream files and reader).
* `files`: the entry's layout and the bound functions of a declared dataset;
* `args`: checks of configs, subsets and classes; `selection`: which images a load takes;
* `prepare`: the upstream files read once into the entry; `load`: `load` and the map-style dataset.
"""
