import os
import subprocess
import sys

import pytest

SCRIPT = """
import numba, numpy as np
from glyphforge.pipelines.resize import resize
resize(np.zeros((2000, 28, 28), np.uint8), (14, 14))  # large enough to start the thread pool
print(numba.threading_layer())
"""


def _run(**env_changes):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update(env_changes, OMP_DISPLAY_ENV="verbose")
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)


def test_openmp_threads_wait_passively_by_default():
    result = _run()
    if result.stdout.strip() != "omp":
        pytest.skip(f"numba uses the {result.stdout.strip()} threading layer here, not OpenMP")
    # libgomp shows PASSIVE even when unset; the spin count tells: 300000 by default, 0 if passive
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in result.stderr and "GOMP_SPINCOUNT = '0'" in result.stderr


def test_a_policy_set_by_the_user_is_kept():
    result = _run(OMP_WAIT_POLICY="ACTIVE")
    if result.stdout.strip() != "omp":
        pytest.skip(f"numba uses the {result.stdout.strip()} threading layer here, not OpenMP")
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in result.stderr
