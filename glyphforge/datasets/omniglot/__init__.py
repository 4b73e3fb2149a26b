"""Omniglot: Brenden Lake's image-set zips, converted once per alphabet, read as classes, episodes and tasks.

* `dataset`: the public functions and `Omniglot`, the map-style dataset;
* `prepare` and `archive`: the zips fetched and converted into cache entries;
* `catalog`: class names and classes read into arrays;
* `splits`, `episodes` and `tasks`: the few-shot benchmark splits, episodes and batches of tasks.
"""
