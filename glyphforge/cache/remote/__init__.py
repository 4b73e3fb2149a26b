"""The cache of a data dir at a URL: its entries listed and read where they lie, and publishing into it.

* `entries`: `RemoteCache`, the store of a URL data dir (read only, deleting nothing);
* `files`: `UrlFiles`, an entry's data files at a URL, read in place or fetched into the shard cache;
* `pull_through`: the local store's source of entries found at the URL;
* `publish` and `prepared`: an entry uploaded whole, and what ``prepare-data`` recorded there.
"""
