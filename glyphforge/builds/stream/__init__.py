"""`ShardStream`: shuffled batches of a built dataset for training, resumable, divided among ranks and workers.

* `stream`: `ShardStream` and `open_stream`, the face of this package;
* `plan`: the epoch's global order (parts, lanes, turns, windows);
* `state`: the options, their bounds and the resumable state;
* `windows`: decoding windows into reused memory; `from_copy`: batches from the decoded copy;
* `workers` and `worker_memory`: a torch ``DataLoader`` worker's batches in shared memory it reuses.
"""
