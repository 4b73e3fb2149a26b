"""CI runs exactly the README's test command, and that command installs what it runs, torch included, and says
how many torch tests it skipped."""
from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

from support.optional import INSTALL_TORCH

ROOT = Path(__file__).resolve().parents[1]


def readme_test_command() -> str:
    """The command in the fenced block after "Install the test extras" in README.md."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"Install the test extras[^\n]*\n\n```bash\n([^\n]+)\n```", text)
    assert found, "README.md has no test command block after 'Install the test extras'"
    return found.group(1)


def test_ci_runs_the_readme_test_command():
    command = readme_test_command()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.rstrip().splitlines()[-1] == command
    assert f"`{command}`" in (ROOT / "README.md").read_text(encoding="utf-8")  # the Tests section says it too


def test_the_command_installs_the_linters_it_runs_and_the_test_extra_holds_none():
    extras = configparser.ConfigParser()
    extras.read(ROOT / "setup.cfg", encoding="utf-8")
    declared = {name: value.split() for name, value in extras["options.extras_require"].items()}
    installed = re.fullmatch(
        re.escape(INSTALL_TORCH) + r' && pip install -e "\.\[([\w,]+)\]" && ruff check \. && mypy && '
        r'pytest( -n auto --dist loadfile)?', readme_test_command())
    assert installed, readme_test_command()
    named = installed.group(1).split(",")
    assert set(named) <= set(declared), f"the command names extras setup.cfg lacks: {set(named) - set(declared)}"
    requirements = [requirement for name in named for requirement in declared[name]]
    assert {"ruff", "mypy", "pytest"} <= {re.split(r"[=<>!~]", requirement)[0] for requirement in requirements}
    assert not [requirement for requirement in declared["test"] if requirement.startswith(("ruff", "mypy"))]


def test_ci_tests_every_python_the_classifiers_list():
    metadata = configparser.ConfigParser()
    metadata.read(ROOT / "setup.cfg", encoding="utf-8")
    listed = re.findall(r"Programming Language :: Python :: (3\.\d+)$", metadata["metadata"]["classifiers"], re.M)
    assert metadata["options"]["python_requires"] == f">={listed[0]}"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    others = re.search(r"^for version in ([\d. ]+); do$", ci, re.M)
    assert others, ".ci/run has no loop over the other Pythons"
    assert ["3.11", *others.group(1).split()] == listed == ["3.11", "3.12", "3.13"]  # 3.11: the README's command
    runs = re.findall(r'^\s*"\.venv-\$version/bin/python" -m pytest (.*)$', ci, re.M)
    assert runs == ['-n auto --dist loadfile -m "not slow"'], runs  # every test not marked slow, no subset


def test_a_run_ends_with_the_count_of_torch_tests_skipped(tmp_path):
    (tmp_path / "test_few.py").write_text(
        "import pytest\n"
        "from support.optional import NO_TORCH, NO_TORCHDATA\n"
        "@pytest.mark.skip(reason=NO_TORCH)\ndef test_a(): pass\n"
        "def test_b(): pytest.importorskip('no_such_module_here', reason=NO_TORCHDATA)\n"
        "@pytest.mark.skip(reason='SLURM is not installed')\ndef test_c(): pass\n"
        "def test_d(): pass\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "support.skip_count", "-p", "no:cacheprovider", "-q", "-n", "0",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-2:] == ["torch tests skipped: 2", "1 passed, 3 skipped in " +
                                             done.stdout.splitlines()[-1].rpartition(" in ")[2]]
