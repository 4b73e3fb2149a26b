"""A built dataset's decoded copy: its arrays as checked ``.npy`` files, for random rows at memory speed.

* `record`: where the copy lives, what its maker records and what its readers check;
* `make`: making the copy, and reading checked rows from it;
* `source`: where a dataset reads rows from, its decoded copy or its shards;
* `crc_combine`: the CRC32 of rows laid end to end, for a batch checked with one call.
"""
