"""Reading a built dataset: `BuiltDataset` over its index, its shards and where their bytes lie.

* `dataset`: `BuiltDataset`, rows at random, in blocks and as arrays, with bounded memory;
* `protocols`: `ShardSource` and `ShardReader`, the two narrow protocols the reader's parts take;
* `index` and `members`: where each shard is, and one shard decoded whole or block by block;
* `entry_files`, `remote_shards` and `shard_fetch`: the shard sources of an entry on disk and at a URL;
* `lookup`: `open_built` and `find_built`; `reopen`: a dataset opened again where it is unpickled;
* `memory` and `own_built`: what ``ds.arrays`` may decode, and builds made from own copies.
"""
