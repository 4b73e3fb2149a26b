"""Run one build into a URL data dir in a separate process: ``python -m support.remote_build_child REQUEST.json``.

The request holds ``spec`` (NoiseSpec keyword arguments), ``session`` (a session string)
and ``data_dir`` (a URL). Prints the entry's URL on success. Used to SIGKILL a remote
build's driver mid-way; the S3 endpoint and credentials come from the environment.
"""
from __future__ import annotations

import json
import sys

from glyphforge.builds.making.url_build import build_into
from glyphforge.context import DataContext

from support.specs import NoiseSpec


def main(request_path: str) -> None:
    request = json.loads(open(request_path, encoding="utf-8").read())
    context = DataContext.resolve(data_dir=request["data_dir"])
    entry = build_into(NoiseSpec(**request["spec"]), context, request["session"], progress=False)
    print(entry.url, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
