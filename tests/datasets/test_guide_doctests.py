"""The guides' ``pycon`` examples run as doctests: every such block of ``docs/guide/*.md``, as written.

They read Omniglot's small sets carried in ``../shared/data`` (the `prepared` data dir of
``tests/datasets/conftest.py``, offline), and skip with its reason where that folder is absent.
"""
from __future__ import annotations

import doctest
import io
import re
from pathlib import Path

import pytest

GUIDES = sorted((Path(__file__).resolve().parents[2] / "docs" / "guide").glob("*.md"))
#: A fenced ``pycon`` block: its text.
BLOCK = re.compile(r"^```pycon\n(.*?)^```", re.MULTILINE | re.DOTALL)
EXAMPLES = [(path.name, number, text) for path in GUIDES
            for number, text in enumerate(BLOCK.findall(path.read_text(encoding="utf-8")))]


def test_the_few_shot_guide_has_doctests():
    assert [guide for guide, _, text in EXAMPLES if "OmniglotTasks" in text and ">>> " in text] == ["loading.md"]


@pytest.mark.parametrize(("guide", "number", "text"), EXAMPLES, ids=[f"{g}-{n}" for g, n, _ in EXAMPLES])
def test_a_guide_example_runs_as_its_doctest(guide, number, text, prepared, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", str(prepared))
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    example = doctest.DocTestParser().get_doctest(text, {}, f"{guide}[{number}]", guide, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = io.StringIO()
    runner.run(example, out=report.write)
    assert example.examples and runner.failures == 0, report.getvalue()
