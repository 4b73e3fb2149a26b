"""Making a built dataset: from a spec to one checked cache entry, on this machine or at a URL.

* `builder`: `build`, a spec's shards fanned out through a session and cached at its destination;
* `spec`: the `Spec` protocol, its checks before any work, and the cache key of its entry;
* `shards`: how a spec is cut, seeded, written and verified (runs on workers);
* `fan_out`: the missing shards made through a session, with progress;
* `destinations`: where the entry goes, chosen once from the context;
* `local_build` and `url_build`: the two destinations, the local cache store and a data dir at a URL.
"""
