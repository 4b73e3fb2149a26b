"""``glyphforge warmup``: every numba kernel compiled once."""
from __future__ import annotations

import argparse
import time

from glyphforge.cli.common import add_command
from glyphforge.textfmt import table


def _warmup(args: argparse.Namespace) -> int:
    from glyphforge.warmup import cache_location, warmup

    started = time.perf_counter()
    timings = warmup()
    rows = [[name, f"{seconds:.2f}"] for name, seconds in timings]
    print(table(["kernel", "seconds"], rows))
    print(f"ready in {time.perf_counter() - started:.1f} s; compiled kernels are kept in {cache_location()}")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add warmup to ``glyphforge``'s sub-commands ``commands``."""
    add_command(commands, "warmup", "compile every numba kernel once (cluster images, job prologues); fast when "
                "already warm", "glyphforge warmup", _warmup)
