"""The documentation: the mkdocs site builds with no warning, the README's links land on its pages,
and the API reference documents every public name.

`mkdocs build --strict` fails on any warning: a page missing from the nav, a broken link or
anchor, a docstring that names a parameter its signature lacks, a reference mkdocstrings
cannot resolve. The `test` extra installs mkdocs-material and mkdocstrings, so CI runs it.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

import glyphforge

from support import api_docs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API_PAGES = sorted((DOCS / "api").glob("*.md"))


def markdown_links(text: str) -> list[str]:
    """Return the targets of the inline Markdown links in ``text``, code blocks left out."""
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    return re.findall(r"\]\(([^)\s]+)\)", prose)


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (mkdocs' default) gives a heading."""
    text = unicodedata.normalize("NFKD", heading.replace("`", "")).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    """Return the anchors of ``page``'s headings (code blocks left out)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(heading) for heading in re.findall(r"^#{1,6} (.+?)\s*$", text, flags=re.MULTILINE)}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once by `mkdocs build --strict` (which fails on any warning) for the tests that read it."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[test]' installs it)")
    pytest.importorskip("mkdocstrings_handlers.python",
                        reason="mkdocstrings[python] is not installed (pip install -e '.[test]' installs it)")
    built = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(built)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=540,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return built


@pytest.mark.slow
def test_the_site_builds_with_no_warning(site):
    for page in ("index.html", "architecture/index.html", "api/builds/index.html"):
        assert (site / page).is_file(), page
    api = (site / "api" / "builds" / "index.html").read_text(encoding="utf-8")
    assert "glyphforge.build" in api and "Parameters" in api  # numpy-style sections rendered, not raw text


@pytest.mark.slow
def test_every_rendered_signature_is_the_objects_own(site):
    """Each signature the API reference shows (functions, classes, methods) is ``inspect.signature`` of the
    object: the same parameters, kinds, annotations and defaults, and return annotation."""
    checked = []
    for page in sorted((site / "api").glob("*/index.html")):
        for path, rendered in api_docs.signatures(page.read_text(encoding="utf-8")):
            found = api_docs.runtime_signature(path)
            if found is None:  # an attribute, a property: no call signature
                continue
            assert api_docs.parsed(rendered) == api_docs.described(found), \
                f"{page.parent.name}: {path}\nrendered: {' '.join(rendered.split())}\ninspect:  {found}"
            checked.append(path)
    assert {"glyphforge.datasets.mnist.load_mnist", "glyphforge.builds.reading.dataset.BuiltDataset.stream",
            "glyphforge.builds.reading.dataset.BuiltDataset", "glyphforge.datasets.emnist.EMNIST"} <= set(checked)


@pytest.mark.slow
def test_every_parameters_table_shows_each_parameters_own_type(site):
    """The type in a Parameters table is the parameter's annotation, also where one docstring entry documents
    several parameters (``context, data_dir, mirrors, offline``: not the first one's type for all)."""
    checked = 0
    for page in sorted((site / "api").glob("*/index.html")):
        for path, name, shown in api_docs.parameter_types(page.read_text(encoding="utf-8")):
            signature = api_docs.runtime_signature(path)
            if signature is None or name not in signature.parameters or not shown:
                continue
            assert api_docs.shown_type(shown) == api_docs.annotation(signature, name), f"{path}: {name}: {shown}"
            checked += 1
    assert checked > 100


@pytest.mark.slow
def test_no_page_shows_a_raw_reference_or_a_builtins_docstring(site):
    """Sphinx-style ``~glyphforge.a.b`` references read as code, and no attribute is documented by the docstring of
    its value's type (``int([x]) -> integer``: an attribute without a docstring of its own, inspected)."""
    for page in sorted(site.rglob("*.html")):
        text = api_docs.text(page.read_text(encoding="utf-8"))
        where = page.relative_to(site).as_posix()
        assert "~glyphforge" not in text, f"{where}: ...{text[text.find('~glyphforge') - 80:][:160]}..."
        for builtin in api_docs.BUILTIN_DOCSTRINGS:
            assert builtin not in text, f"{where}: ...{text[text.find(builtin) - 120:][:200]}..."


def test_every_internal_link_of_the_readme_lands_on_a_page_that_exists():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    links = [link for link in markdown_links((ROOT / "README.md").read_text(encoding="utf-8"))
             if not re.match(r"[a-z][a-z0-9+.-]*:", link)]
    assert any(link.startswith("docs/") for link in links), "README.md links into no docs page"
    for link in links:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.is_file(), f"README.md links to {link}: there is no {path}"
        if target.is_relative_to(DOCS):
            page = target.relative_to(DOCS).as_posix()
            assert target.suffix == ".md" and page in nav, f"README.md links to {link}, not a page of mkdocs.yml's nav"
        if anchor:
            assert anchor in anchors(target), f"README.md links to {link}: {path} has no heading #{anchor}"


def test_the_api_reference_documents_every_public_name():
    documented = [name for page in API_PAGES for name in
                  re.findall(r"^\s+heading: glyphforge\.(\w+)$", page.read_text(encoding="utf-8"), flags=re.MULTILINE)]
    public = set(glyphforge.__all__) - {"__version__"}
    assert sorted(public - set(documented)) == [], "add each to a page of docs/api/ (`::: module.NAME`)"
    assert sorted(set(documented) - public) == [], "documented as glyphforge.NAME but not in glyphforge.__all__"
    assert len(documented) == len(set(documented)), "a name is documented twice"


def test_the_link_and_anchor_helpers():
    assert markdown_links("see [a](docs/a.md#b) and `[c](d)`\n```\n[e](f)\n```\n[g](https://x)") == [
        "docs/a.md#b", "https://x"]
    assert slug("What glyphforge deletes: only what it wrote") == "what-glyphforge-deletes-only-what-it-wrote"
    assert slug("Upstream files in `raw/`") == "upstream-files-in-raw"
