"""Scenes: an application on top of the datasets and the builder.

* `glyphforge.scenes.spec`: the `ScatteredGlyphs` build spec (glyphs scattered over
  backgrounds, with boxes and labels), composed of parts: `layout`, `objects` (and
  `shapes`), `task`, `motion`; `arrays` makes the arrays, `checks` checks the fields;
* `glyphforge.scenes.presets`: the datasets of the literature (Moving MNIST...) as specs;
* `glyphforge.scenes.sources`: where its glyphs and textures come from (the registered
  datasets, read from the cache);
* `glyphforge.scenes.own_sources`: which own copies (unverified) a scenes build reads.

Nothing below this package imports it. Importing it loads neither numba, Pillow nor Dask:
numba is loaded where scenes are made (a shard, or the spec's one warm-up scene), Pillow
where font glyphs or colour names are used.
"""
from glyphforge.scenes.spec import ScatteredGlyphs

__all__ = ["ScatteredGlyphs"]
