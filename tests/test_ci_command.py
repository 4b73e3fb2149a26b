"""CI runs exactly the README's test command, and that command installs what it runs."""
from __future__ import annotations

import configparser
import re
from pathlib import Path

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
        r'pip install -e "\.\[([\w,]+)\]" && ruff check \. && mypy && pytest( -n auto --dist loadfile)?',
        readme_test_command())
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
