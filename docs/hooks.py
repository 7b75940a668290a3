"""The reference pages' parts generated from the code, and the site build's hook.

A page is read in two places: on the repository's page, where GitHub renders the Markdown as
committed, and on the site. So what is generated from the code is committed into the page,
between a marker and ``<!-- /generated -->``, and a unit test (tests/unit/test_docs_on_github.py)
fails when it is no longer what the code gives; ``python docs/hooks.py`` refreshes it:

- ``<!-- generated: errors -->``: a table of every ``jetspark.errors.JetsparkError`` subclass
  (its condition ``code``, module and the first paragraph of its docstring);
- ``<!-- generated: api MODULE NAME NAME … -->``: a table of the named public objects of MODULE
  (``*``: every public function and class it defines): parameters, first paragraph, source file.

On the site (``mkdocs build``), :func:`on_page_markdown` replaces each api table by
mkdocstrings' ``::: MODULE.NAME`` directives, which render the signatures, typed parameter
tables and cross-links from the docstrings (committed, they would show raw on GitHub), and
docs/changelog.md, a link on GitHub, by CHANGELOG.md itself.

The table needs jetspark and PySpark importable; the site's rendering reads the sources (a copy
of the installed package layout, see :func:`_package_tree`) and imports nothing.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The pages with generated parts.
PAGES = (ROOT / "docs" / "reference" / "api.md", ROOT / "docs" / "reference" / "errors.md")
REFRESH = "python docs/hooks.py"
_BLOCK = re.compile(r"^<!-- generated: (?P<what>errors|api (?P<module>[\w.]+) (?P<names>[\w *]+)) -->\n"
                    r"(?P<body>.*?)^<!-- /generated -->$", re.MULTILINE | re.DOTALL)
_PACKAGES = ("jetspark", "jetspark.datasources", "jetspark.sinks", "jetspark.windowing")
_CHANGELOG_PAGE = "changelog.md"


def _package_dirs() -> dict[str, Path]:
    """Package → its folder in the repository (pyproject's ``package-dir``)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        mapping = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {name: ROOT / folder for name, folder in mapping.items() if name}


def _source_file(module_name: str) -> Path:
    """The repository file that defines ``module_name`` (installed or editable alike)."""
    dirs = _package_dirs()
    package = max((p for p in dirs if module_name == p or module_name.startswith(p + ".")), key=len)
    base = dirs[package].joinpath(*module_name[len(package):].split(".")[1:])
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _inline(text: str) -> str:
    """A docstring's reStructuredText/autorefs markup as plain Markdown for a table cell."""
    text = re.sub(r"``(.+?)``", r"`\1`", text)
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    text = re.sub(r"\[([^\]]+)\]\[[\w.]*\]", r"\1", text)
    return text.replace("|", "\\|")


def _first_paragraph(obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def _import_all() -> None:
    """Imports every module of the library's packages, so every error class is defined."""
    for name in _PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if ".devtools" in info.name or info.name.rsplit(".", 1)[-1].startswith("_"):
                continue
            try:
                importlib.import_module(info.name)
            except Exception:  # a module that needs an optional dependency (matplotlib)
                continue


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def errors_table() -> str:
    from jetspark.errors import JetsparkError

    _import_all()
    rows = ["| error | condition (`code`) | module | when |", "| --- | --- | --- | --- |"]
    classes = sorted({c for c in [JetsparkError, *_subclasses(JetsparkError)]},
                     key=lambda c: (c is not JetsparkError, c.__name__))
    for cls in classes:
        bases = ", ".join(b.__name__ for b in cls.__bases__)
        rows.append(f"| `{cls.__name__}` ({bases}) | `{cls.code}` | `{cls.__module__}` | "
                    f"{_inline(_first_paragraph(cls))} |")
    return "\n".join(rows)


def _parameters(obj: object) -> str:
    """``(a, b, /, *, c, **more)``: the parameter names, without annotations or defaults."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    out, star = [], False
    for i, p in enumerate(signature.parameters.values()):
        if p.kind is p.VAR_POSITIONAL:
            out.append(f"*{p.name}")
            star = True
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        out.append(f"**{p.name}" if p.kind is p.VAR_KEYWORD else p.name)
        following = list(signature.parameters.values())[i + 1:]
        if p.kind is p.POSITIONAL_ONLY and (not following or following[0].kind is not p.POSITIONAL_ONLY):
            out.append("/")
    return f"({', '.join(out)})"


def _defined(module) -> list[str]:
    """The public functions and classes a module defines (or lists in ``__all__``), in order."""
    names = getattr(module, "__all__", None) or [
        n for n, obj in vars(module).items()
        if not n.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == module.__name__]
    return [n for n in names if callable(getattr(module, n))]


def _names(module_name: str, names: list[str]) -> list[str]:
    return _defined(importlib.import_module(module_name)) if names == ["*"] else names


def api_table(module_name: str, names: list[str], page: Path = PAGES[0]) -> str:
    """A table of ``names`` in the module (``*``: all it defines): call, what, source file."""
    module = importlib.import_module(module_name)
    rows = ["| object | what it does | defined in |", "| --- | --- | --- |"]
    for name in _names(module_name, names):
        obj = getattr(module, name)
        kind = "class " if inspect.isclass(obj) else ""
        source = _source_file(obj.__module__)
        link = Path(*[".."] * (len(page.relative_to(ROOT).parts) - 1), source.relative_to(ROOT))
        rows.append(f"| {kind}`{module_name}.{name}{_parameters(obj)}` | "
                    f"{_inline(_first_paragraph(obj))} | [{source.relative_to(ROOT)}]({link.as_posix()}) |")
    return "\n".join(rows)


def _generated(match: re.Match, page: Path) -> str:
    if match["what"] == "errors":
        return errors_table()
    return api_table(match["module"], match["names"].split(), page)


def refreshed(text: str, page: Path) -> str:
    """The page with each generated part as the code gives it now."""
    def block(m: re.Match) -> str:
        return f"<!-- generated: {m['what']} -->\n{_generated(m, page)}\n<!-- /generated -->"
    return _BLOCK.sub(block, text)


def stale_pages() -> list[Path]:
    """The pages whose committed generated parts are not what the code gives."""
    return [page for page in PAGES if refreshed(page.read_text(), page) != page.read_text()]


def site_markdown(text: str) -> str:
    """The page as the site renders it: api tables become mkdocstrings directives."""
    def directives(m: re.Match) -> str:
        if m["what"] == "errors":
            return m.group(0)
        names = _names(m["module"], m["names"].split())
        return "".join(f"::: {m['module']}.{name}\n" for name in names)
    return _BLOCK.sub(directives, text)


def _package_tree() -> Path:
    """A folder holding jetspark as installed (its subpackages live in folders of their own
    in the repository, see pyproject's ``package-dir``), made of links, for mkdocstrings to read."""
    tree = Path(tempfile.mkdtemp(prefix="jetspark-docs-")) / "jetspark"
    tree.mkdir()
    dirs = _package_dirs()
    for child in dirs["jetspark"].iterdir():
        (tree / child.name).symlink_to(child)
    for name, folder in dirs.items():
        if name.startswith("jetspark.") and name.count(".") == 1 and name != "jetspark.devtools":
            (tree / name.split(".")[1]).symlink_to(folder)
    return tree.parent


_TREES: list[Path] = []


def on_config(config):
    """mkdocstrings reads the package from :func:`_package_tree` (set before mkdocstrings' own
    ``on_config`` makes its handler: ``mkdocs.plugins.event_priority`` below)."""
    _TREES.append(_package_tree())
    config.plugins["mkdocstrings"].config.handlers.setdefault("python", {})["paths"] = [str(_TREES[-1])]
    return config


on_config.mkdocs_priority = 100  # what mkdocs.plugins.event_priority(100) sets, without importing mkdocs


def on_shutdown() -> None:
    for tree in _TREES:
        shutil.rmtree(tree, ignore_errors=True)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page is not None and page.file.src_uri == _CHANGELOG_PAGE:
        return (ROOT / "CHANGELOG.md").read_text()
    return site_markdown(markdown)


def main(argv: list[str]) -> int:
    """``python docs/hooks.py``: rewrite the pages' generated parts; ``--check``: only say which are stale."""
    stale = stale_pages()
    if "--check" in argv:
        for page in stale:
            print(f"{page.relative_to(ROOT)} is stale: run {REFRESH}")
        return 1 if stale else 0
    for page in stale:
        page.write_text(refreshed(page.read_text(), page))
        print(f"refreshed {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
