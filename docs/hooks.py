"""mkdocs hook: pages rendered from the code at build time, so they cannot drift from it.

- ``<!-- generated: errors -->``: a table of every ``jetspark.errors.JetsparkError`` subclass
  (its condition ``code``, module and the first paragraph of its docstring);
- ``<!-- generated: api MODULE NAME NAME … -->``: the signatures and docstrings of the named
  public objects of MODULE (``*``: every public function and class it defines).

The build imports jetspark (installed, as ``make docs`` has it) and PySpark; nothing is fetched.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

_API = re.compile(r"^<!-- generated: api ([\w.]+) ([\w *]+) -->$", re.MULTILINE)
_ERRORS = "<!-- generated: errors -->"
_PACKAGES = ("jetspark", "jetspark.datasources", "jetspark.sinks", "jetspark.windowing")


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
        when = _first_paragraph(cls).replace("|", "\\|")
        rows.append(f"| `{cls.__name__}` ({bases}) | `{cls.code}` | `{cls.__module__}` | {when} |")
    return "\n".join(rows)


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""


def _defined(module) -> list[str]:
    """The public functions and classes a module defines (or lists in ``__all__``), in order."""
    names = getattr(module, "__all__", None) or [
        n for n, obj in vars(module).items()
        if not n.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == module.__name__]
    return [n for n in names if callable(getattr(module, n))]


def api_section(module_name: str, names: list[str]) -> str:
    """Signatures and docstrings of ``names`` in the module (``*``: all it defines)."""
    module = importlib.import_module(module_name)
    if names == ["*"]:
        names = _defined(module)
    parts = []
    for name in names:
        obj = getattr(module, name)
        kind = "class" if inspect.isclass(obj) else "def" if callable(obj) else ""
        signature = _signature(obj) if callable(obj) else ""
        parts.append(f"### `{module_name}.{name}`\n\n```text\n{kind} {name}{signature}\n```\n")
        doc = inspect.getdoc(obj)
        if doc and (kind or not isinstance(obj, (int, str, float))):
            parts.append(f"```text\n{doc}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replaces the ``generated`` markers of a page by what the code says."""
    if _ERRORS in markdown:
        markdown = markdown.replace(_ERRORS, errors_table())
    return _API.sub(lambda m: api_section(m.group(1), m.group(2).split()), markdown)
