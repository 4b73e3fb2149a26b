"""A built dataset's decoded copy: its arrays as checked ``.npy`` files, for random rows at memory speed.

* `life`: the copy on disk from making to dropping: where it lives, making and recording it, checking it when
  opened, dropping it when damaged;
* `rows`: rows read from an opened copy, each checked against its recorded CRC32;
* `source`: where a dataset reads rows from, its decoded copy or its shards;
* `crc_combine`: the CRC32 of rows laid end to end, for a batch checked with one call.
"""
