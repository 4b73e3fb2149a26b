"""Publishing a 1 GB cache entry to moto's S3 server on loopback and to a file:// directory (goal: 200 MB/s).

    python benchmarks/bench_publish.py                         # 1 GB: one 1 GB file, and 16 files of 64 MB
    python benchmarks/bench_publish.py --mb 256 --repeats 1    # quicker

The entry is written through the cache store (`CacheStore.create`) with incompressible data
files (``os.urandom``): ``--files 1`` is a build on one disk (one ``arrays.pklz``), ``--files
16`` a build in parts. Each run publishes it with ``glyphforge.cache.remote.publish.publish_entry``
(``progress=False``) into a new bucket of a moto server (``moto_server``, its own process,
so that it does not share the uploader's interpreter) and into a new directory of the same
disk, timed from the call to its return (the manifest written), with the CPU seconds the
publishing process and the moto server spent (moto's bounds its throughput on this machine).
Also measured: one bare s3fs ``put_file`` of the largest file with s3fs's defaults.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from moto_process import cpu_seconds, start_moto  # noqa: E402

GOAL_MB_S = 200.0


def make_entry(data_dir: Path, total_mb: int, files: int):
    """Write an entry of ``files`` incompressible data files of ``total_mb`` MB in all; return it."""
    from glyphforge.cache import CacheStore

    store = CacheStore.for_data_dir(data_dir)
    params = {"mb": total_mb, "files": files}
    entry = store.get("bench-publish", params)
    if entry is None:
        with store.create("bench-publish", params) as writer:
            for number in range(files):
                with open(writer.path / f"part-{number:06d}.pklz", "wb") as out:
                    for _ in range(total_mb // files):
                        out.write(os.urandom(1 << 20))
        entry = store.get("bench-publish", params)
    assert entry is not None
    return entry


def timed_publish(entry, url: str) -> tuple[float, float]:
    """Publish ``entry`` to ``url``; return the seconds it took and the CPU seconds this process spent."""
    from glyphforge.cache.remote.publish import publish_entry

    started, cpu = time.perf_counter(), time.process_time()
    published = publish_entry(entry, url, progress=False)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert not published.already
    return seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=1024, help="the entry's size in MB (MiB)")
    parser.add_argument("--files", type=int, nargs="+", default=[1, 16], help="how many data files (one run each)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "glyphforge-bench-publish")
    args = parser.parse_args()

    server, endpoint = start_moto()
    try:
        os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                          AWS_ENDPOINT_URL=endpoint)
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True)
        nbytes = args.mb << 20
        print(f"publishing {args.mb} MiB; moto_server at {endpoint}; load average {os.getloadavg()[0]:.1f}")
        for files in args.files:
            entry = make_entry(args.workdir / "data", args.mb, files)
            for target in ("s3", "file"):
                seconds, our_cpu, server_cpu = [], [], []
                for run in range(args.repeats):
                    if target == "s3":
                        bucket = f"bench-{files}-{run}-{time.monotonic_ns()}"
                        fs.mkdir(bucket)
                        url = f"s3://{bucket}/data"
                    else:
                        url = Path(tempfile.mkdtemp(prefix="publish-", dir=args.workdir)).as_uri()
                    before = cpu_seconds(server.pid)
                    took, spent = timed_publish(entry, url)
                    seconds.append(took)
                    our_cpu.append(spent)
                    server_cpu.append(cpu_seconds(server.pid) - before)
                    if target == "s3":
                        fs.rm(bucket, recursive=True)
                    else:
                        subprocess.run(["rm", "-rf", url[len("file://"):]], check=True)
                best, median = min(seconds), statistics.median(seconds)
                rate = nbytes / 1e6 / median
                cpu = f"; CPU: ours {statistics.median(our_cpu):.2f} s" + (
                    f", moto's {statistics.median(server_cpu):.2f} s" if target == "s3" else "")
                print(f"{files:3d} file(s) -> {target:4s}: median {median:.2f} s, best {best:.2f} s = "
                      f"{rate:,.0f} MB/s (best {nbytes / 1e6 / best:,.0f}), {rate / GOAL_MB_S:.2f}x the goal{cpu}")
        largest = max(entry.path.glob("part-*.pklz"), key=lambda path: path.stat().st_size)
        fs.mkdir("bench-bare")
        before, started = cpu_seconds(server.pid), time.perf_counter()
        fs.put_file(str(largest), "bench-bare/x")  # s3fs's defaults: 50 MiB parts, 10 at once
        seconds, server_seconds = time.perf_counter() - started, cpu_seconds(server.pid) - before
        print(f"bare s3fs put_file of {largest.stat().st_size >> 20} MiB (defaults): {seconds:.2f} s = "
              f"{largest.stat().st_size / 1e6 / seconds:,.0f} MB/s; moto's CPU {server_seconds:.2f} s")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
