"""Run one build in a separate process: ``python -m support.build_child REQUEST.json``.

The request holds ``spec`` (NoiseSpec keyword arguments), ``session`` (a session
string), ``session_options`` and ``data_dir``. Prints the entry key on success.
Used to SIGKILL a whole build mid-way, and to run a SLURM build inside the test
cluster's network namespace.
"""
from __future__ import annotations

import json
import sys

from glyphforge.builds.making.builder import build
from glyphforge.session import open_session

from support.specs import NoiseSpec


def main(request_path: str) -> None:
    request = json.loads(open(request_path, encoding="utf-8").read())
    with open_session(request["session"], **request.get("session_options", {})) as session:
        dataset = build(NoiseSpec(**request["spec"]), session=session, data_dir=request["data_dir"],
                        progress=False)
    print(dataset.key, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
