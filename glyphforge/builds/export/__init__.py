"""A built dataset written out for other readers, shard by shard.

* `files`: `export`, ``.npy`` files to memory-map (and the dispatch to the other formats);
* `parquet`: Parquet files and a Hugging Face ``datasets.Dataset``;
* `frames`: a scene dataset frame by frame, for the detection formats `coco`, `yolo` and `mot`.
"""
