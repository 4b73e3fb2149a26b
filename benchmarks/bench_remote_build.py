"""Benchmark a build into object storage (#25) against the same build on local disk.

    python benchmarks/bench_remote_build.py                    # 100,000 font scenes, processes:2
    python benchmarks/bench_remote_build.py --examples 20000 --rounds 1

Builds ``ScatteredGlyphs(N, glyphs="font")`` (48x48, 1-3 glyphs from Pillow's font on flat
colours: no data needed; shards of 1,000 as ``bench_read.py`` builds them) on one
``processes:2`` session, warmed up first by a small build of each kind (its workers' kernels
compiled or loaded, s3fs and botocore imported), into a
local data dir and into ``s3://`` on moto's S3 server, run as its own process on 127.0.0.1
(as a real store would be: not sharing the driver's interpreter), alternately, ``--rounds``
times each. Prints each time, the best of each and their ratio (goal: <= 1.3x).

Then it takes the remote build apart: what one ``put`` of a part of the measured size costs
moto (the per-object cost), and the moto server's CPU seconds during the remote builds
(the 2 cores are shared by the 2 workers, the driver and the server).
"""
from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # one core per worker: no hidden thread pools

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from moto_process import ENVIRONMENT, cpu_seconds, start_moto  # noqa: E402


def per_shard(spec, scratch: Path, fs, shards: int = 10) -> None:
    """Time one shard's local task (`ShardTask`) against its remote task (`RemoteShardTask`), alternated here.

    The same process runs both on the same shards, one after the other, so the load of the
    machine (other builds, other users) hits both alike: the difference of the medians is what
    writing a part and its record to S3 costs over writing them to the local disk.
    """
    from glyphforge.builds.making.shards import ShardTask, count_shards
    from glyphforge.builds.making.url_build import RemoteShardTask, entry_location
    from glyphforge.storage.location import Location

    shards = min(shards, count_shards(spec.n_examples, spec.shard_size))

    fs.mkdir("bench-shards")
    work = scratch / "per-shard"
    work.mkdir()
    local_task = ShardTask(spec, str(work), str(scratch / "unused"))
    remote_task = RemoteShardTask(spec, entry_location(Location("s3://bench-shards/data"), spec.kind, "k" * 64),
                                  Location("s3://bench-shards/data"))
    local_times, remote_times = [], []
    for index in range(shards):
        for task, times in ((local_task, local_times), (remote_task, remote_times)):
            started = time.perf_counter()
            task(index)
            times.append(time.perf_counter() - started)
    local, remote = statistics.median(local_times) * 1000, statistics.median(remote_times) * 1000
    print(f"one shard of {spec.shard_size:,} scenes, alternated in one process ({shards} each): local task "
          f"{local:.0f} ms, remote task {remote:.0f} ms (median): {remote - local:+.0f} ms a shard "
          f"({(remote - local) / local:+.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--shard-size", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=2, help="builds of each kind, alternated (best is compared)")
    args = parser.parse_args()

    server, endpoint = start_moto()
    os.environ.update(ENVIRONMENT, AWS_ENDPOINT_URL=endpoint)  # before the workers start: they inherit it
    import s3fs

    import glyphforge as gf
    from glyphforge.builds.making.url_build import build_into
    from glyphforge.context import DataContext
    from glyphforge.session import open_session

    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench-remote-build-"))
    os.environ["GLYPHFORGE_CACHE_DIR"] = str(scratch / "local-cache")
    try:
        with open_session("processes", n_workers=2) as session:
            warm = gf.ScatteredGlyphs(4_000, glyphs="font", shard_size=args.shard_size, seed=99)
            gf.build(warm, session=session, data_dir=scratch / "warm", progress=False)
            fs.mkdir("bench-warm")  # the workers' first S3 write imports s3fs and botocore: not timed either
            build_into(warm, DataContext.resolve(data_dir="s3://bench-warm/data"), session, progress=False)
            local_times, remote_times, moto_cpu = [], [], []
            for round_ in range(args.rounds):
                spec = gf.ScatteredGlyphs(args.examples, glyphs="font", shard_size=args.shard_size, seed=round_)
                started = time.perf_counter()
                local = gf.build(spec, session=session, data_dir=scratch / f"local-{round_}", progress=False)
                local_times.append(time.perf_counter() - started)
                bucket = f"bench-{round_}"
                fs.mkdir(bucket)
                context = DataContext.resolve(data_dir=f"s3://{bucket}/data")
                cpu, started = cpu_seconds(server.pid), time.perf_counter()
                entry = build_into(spec, context, session, progress=False)
                remote_times.append(time.perf_counter() - started)
                moto_cpu.append(cpu_seconds(server.pid) - cpu)
                print(f"round {round_ + 1}: local {local_times[-1]:.1f} s, into S3 {remote_times[-1]:.1f} s "
                      f"({remote_times[-1] / local_times[-1]:.2f}x; moto used {moto_cpu[-1]:.1f} CPU s)", flush=True)
            parts = fs.ls(entry.path, detail=True)
            part_sizes = [item["size"] for item in parts if item["name"].endswith(".pklz")]
            total = sum(part_sizes)
            mean = statistics.mean(part_sizes)
            print(f"\n{args.examples:,} font scenes, {len(part_sizes)} shards, parts of {mean / 1e6:.2f} MB on "
                  f"average ({total / 1e6:.0f} MB in all; local arrays.pklz "
                  f"{(local.path / 'arrays.pklz').stat().st_size / 1e6:.0f} MB)")
            best_local, best_remote = min(local_times), min(remote_times)
            print(f"local disk: {best_local:.1f} s best ({', '.join(f'{t:.1f}' for t in local_times)})")
            print(f"into S3:    {best_remote:.1f} s best ({', '.join(f'{t:.1f}' for t in remote_times)})")
            ratios = [remote / local for remote, local in zip(remote_times, local_times, strict=True)]
            print(f"ratio:      {best_remote / best_local:.2f}x of the best times (goal <= 1.3x); round by round "
                  f"median {statistics.median(ratios):.2f}x")

        per_shard(spec, scratch, fs)

        # the per-object cost: one put of a part-sized object, from one process, as each worker does
        data = os.urandom(int(mean))
        fs.mkdir("bench-puts")
        cpu, started = cpu_seconds(server.pid), time.perf_counter()
        for number in range(20):
            fs.pipe_file(f"bench-puts/object-{number}", data)
        seconds = (time.perf_counter() - started) / 20
        print(f"one put of {len(data) / 1e6:.2f} MB: {seconds * 1000:.0f} ms ({len(data) / seconds / 1e6:.0f} MB/s), "
              f"moto CPU {(cpu_seconds(server.pid) - cpu) / 20 * 1000:.0f} ms; {len(part_sizes)} parts: "
              f"{len(part_sizes) * seconds:.1f} s of puts shared by 2 workers")
    finally:
        server.terminate()
        server.wait(30)
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
