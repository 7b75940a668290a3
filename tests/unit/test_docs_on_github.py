"""The pages a README link reaches read on the repository's page as on the site: GitHub renders
the Markdown as committed, so nothing is left for a build step to fill in (docs/hooks.py)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re

from tests import readme

#: Markdown that only the site's build turns into content; GitHub shows it as typed.
BUILD_ONLY = {
    "snippet include": re.compile(r"^\s*--8<--"),
    "content tab": re.compile(r"^\s*=== +[\"']"),
    "mkdocstrings directive": re.compile(r"^\s*:::\s"),
    "admonition": re.compile(r"^\s*(!!!|\?\?\?\+?) "),
    "attribute list": re.compile(r"\{:?\s*[#.][A-Za-z][\w-]*[^}]*\}\s*$"),
    "macro": re.compile(r"\{\{.*\}\}|\{%.*%\}"),
}
ROLE = re.compile(r":(func|class|meth|attr|mod|exc|data|obj|ref):`")


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", readme.ROOT / "docs" / "hooks.py")
    assert spec and spec.loader
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


def readme_pages() -> list:
    """The files README.md links to (its Markdown pages), each once."""
    text = (readme.ROOT / "README.md").read_text()
    targets = {m.split("#", 1)[0] for m in re.findall(r"\]\(([^)\s]+\.md(?:#[^)]*)?)\)", text)}
    return sorted(readme.ROOT / t for t in targets if not t.startswith(("http:", "https:")))


def _prose_lines(text: str):
    """(number, line) of the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1).startswith(fence):
                fence = None
            continue
        if fence is None:
            yield number, line


def test_readme_links_reach_the_reference_pages():
    pages = readme_pages()
    assert all(p.exists() for p in pages), [str(p) for p in pages if not p.exists()]
    names = {p.relative_to(readme.ROOT).as_posix() for p in pages}
    assert {"docs/reference/api.md", "docs/reference/errors.md", "docs/explanation/windows.md",
            "docs/explanation/watermarks.md"} <= names


def test_readme_linked_pages_have_no_build_only_markdown():
    found = [f"{page.relative_to(readme.ROOT)}:{number}: {what}: {line.strip()}"
             for page in readme_pages() for number, line in _prose_lines(page.read_text())
             for what, pattern in BUILD_ONLY.items() if pattern.search(line)]
    assert found == []


def test_generated_parts_are_committed_and_current():
    """The API and errors tables are in the pages as committed, and are what the code gives
    now; when this fails, run ``python docs/hooks.py`` and commit the pages."""
    hooks = _hooks()
    for page in hooks.PAGES:
        blocks = list(hooks._BLOCK.finditer(page.read_text()))
        assert blocks and all(b["body"].startswith("| ") for b in blocks), page
    stale = [str(p.relative_to(readme.ROOT)) for p in hooks.stale_pages()]
    assert stale == [], f"stale generated tables in {stale}: run {hooks.REFRESH} and commit them"


def test_errors_table_lists_every_error_class():
    from jetspark.errors import JetsparkError

    hooks = _hooks()
    errors = (readme.ROOT / "docs" / "reference" / "errors.md").read_text()
    assert "`JETSPARK_OPTION_ERROR`" in errors
    assert [c.__name__ for c in hooks._subclasses(JetsparkError) if f"| `{c.__name__}` (" not in errors] == []


def test_site_renders_every_tabled_object_from_its_docstring():
    """On the site each row of the API tables becomes a mkdocstrings directive, and the
    changelog page becomes CHANGELOG.md."""
    hooks = _hooks()
    page = readme.ROOT / "docs" / "reference" / "api.md"
    site = hooks.site_markdown(page.read_text())
    tabled = re.findall(r"^\| (?:class )?`([\w.]+)[(`]", page.read_text(), re.MULTILINE)
    assert tabled and re.findall(r"^::: ([\w.]+)$", site, re.MULTILINE) == tabled
    assert "<!-- generated: api" not in site

    class File:
        src_uri = "changelog.md"

    class Page:
        file = File()

    source = (readme.ROOT / "docs" / "changelog.md").read_text()
    changelog = hooks.on_page_markdown(source, Page(), None, None)
    assert changelog == (readme.ROOT / "CHANGELOG.md").read_text()


def test_api_docstrings_have_no_sphinx_roles():
    """mkdocstrings renders Markdown: a ``:func:`x``` role would show as typed. Links between
    the objects are autorefs (``[`x`][jetspark.module.x]``), other names plain code."""
    page = readme.ROOT / "docs" / "reference" / "api.md"
    found = []
    for path in re.findall(r"^\| (?:class )?`([\w.]+)[(`]", page.read_text(), re.MULTILINE):
        module, name = path.rsplit(".", 1)
        obj = getattr(importlib.import_module(module), name)
        members = [(n, m) for n, m in vars(obj).items()
                   if not n.startswith("_")] if inspect.isclass(obj) else []
        for label, item in [(path, obj), *((f"{path}.{n}", m) for n, m in members)]:
            doc = getattr(item.fget if isinstance(item, property) else item, "__doc__", None) or ""
            if ROLE.search(doc):
                found.append(label)
    assert found == []

