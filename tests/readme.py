"""The executable parts of the documentation (README.md and the pages under docs/): its
examples and its options tables.

Markers (HTML comments, invisible on GitHub):

- ``<!-- example: NAME -->`` right before a fenced ```` ```python ```` block names that example;
  every python block must have one (a block that must not run is not ``python``). Names are
  unique over all pages, except that a page may show another page's example again word for
  word (README.md's quickstart is docs/tutorials/first-pipeline.md's): it runs once.
- ``<!-- expected output -->`` right before a fenced ```` ```text ```` block that follows an
  example: what the example prints, line by line.
- ``<!-- expected output on a re-run -->`` right after that block: what the example prints
  when it runs a second time after the first (same services, same checkpoints); without it, a
  re-run prints the expected output again.
- ``<!-- options: FORMAT -->`` right before a markdown table whose first column holds
  backticked option names (several per cell allowed) and second column the default.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pages() -> list[Path]:
    """README.md and every markdown page of the site, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


class _AllPages:
    """``README.read_text()``: every page's text, one after another (a marker such as
    ``<!-- sink-words -->`` is found on whichever page holds it)."""

    def read_text(self) -> str:
        return "\n\n".join(page.read_text() for page in pages())

    def __str__(self) -> str:
        return "README.md and docs/**/*.md"


README = _AllPages()

_EXAMPLE = re.compile(r"^<!--\s*example:\s*([\w-]+)\s*-->$")
_EXPECTED = re.compile(r"^<!--\s*expected output\s*-->$")
_RERUN = re.compile(r"^<!--\s*expected output on a re-run\s*-->$")
_OPTIONS = re.compile(r"^<!--\s*options:\s*([\w-]+)\s*-->$")
_FENCE = re.compile(r"^```(\w*)\s*$")
_TICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Example:
    name: str
    code: str
    expected: str | None
    line: int
    page: str = "README.md"
    """The page's path relative to the repository."""
    rerun: str | None = None
    """What a second run prints, when it differs from ``expected``."""

    @property
    def rerun_expected(self) -> str | None:
        return self.rerun if self.rerun is not None else self.expected


@dataclass(frozen=True)
class OptionRow:
    names: tuple[str, ...]
    default: str
    """The default cell as written (markdown)."""

    @property
    def literal_default(self) -> str | None:
        """The default when the cell is exactly one backticked value, else None."""
        m = re.fullmatch(r"`([^`]*)`", self.default.strip())
        return m.group(1) if m else None


def _lines(text: str | None = None) -> list[str]:
    return (text if text is not None else README.read_text()).splitlines()


def _page_texts(text: str | None) -> list[tuple[str, str]]:
    if text is not None:
        return [("README.md", text)]
    return [(str(page.relative_to(ROOT)), page.read_text()) for page in pages()]


def _fenced(lines: list[str], start: int) -> tuple[str, str, int]:
    """The language and body of the fence opening at ``start``, and the index after it."""
    m = _FENCE.match(lines[start].lstrip())
    if not m:
        raise ValueError(f"README line {start + 1}: expected a ``` fence, got {lines[start]!r}")
    end = start + 1
    while end < len(lines) and lines[end].strip() != "```":
        end += 1
    if end == len(lines):
        raise ValueError(f"README line {start + 1}: unclosed fence")
    return m.group(1), textwrap.dedent("\n".join(lines[start + 1 : end]) + "\n"), end + 1


def _next_nonblank(lines: list[str], i: int) -> int:
    while i < len(lines) and not lines[i].strip():
        i += 1
    return i


def examples(text: str | None = None) -> list[Example]:
    """Every python block of every page (or of ``text``) with its name and expected output, once
    per name; raises for unnamed blocks and for one name on different code."""
    found = [e for page, body in _page_texts(text) for e in _page_examples(page, body)]
    out: dict[str, Example] = {}
    for e in found:
        first = out.setdefault(e.name, e)
        if (first.code, first.expected) != (e.code, e.expected):
            raise ValueError(f"example {e.name!r} differs between {first.page}:{first.line} "
                             f"and {e.page}:{e.line}: a name is one example")
    return list(out.values())


def _rerun_marker(lines: list[str], start: int) -> int:
    """The line of the ``<!-- expected output on a re-run -->`` marker that follows an expected
    output, prose (which says why a re-run prints otherwise) allowed between; ``len(lines)``
    when a block, a heading or another example comes first."""
    for j in range(start, len(lines)):
        line = lines[j].strip()
        if _RERUN.match(line):
            return j
        if _FENCE.match(line) or _EXAMPLE.match(line) or line.startswith(("#", "<!--")):
            break
    return len(lines)


def _page_examples(page: str, text: str) -> list[Example]:
    lines = text.splitlines()  # fences may be indented (inside list items): they count too
    out: list[Example] = []
    pending: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        named = _EXAMPLE.match(line)
        if named:
            pending = named.group(1)
            i += 1
            continue
        if _FENCE.match(lines[i].lstrip()):
            lang, body, after = _fenced(lines, i)
            if lang == "python":
                if pending is None:
                    raise ValueError(f"{page} line {i + 1}: python block without <!-- example: name -->")
                expected = None
                j = _next_nonblank(lines, after)
                if j < len(lines) and _EXPECTED.match(lines[j].strip()):
                    k = _next_nonblank(lines, j + 1)
                    exp_lang, expected, after = _fenced(lines, k)
                    if exp_lang != "text":
                        raise ValueError(f"{page} line {k + 1}: expected output must be a text block")
                rerun = None
                j = _rerun_marker(lines, after) if expected is not None else len(lines)
                if j < len(lines):
                    k = _next_nonblank(lines, j + 1)
                    exp_lang, rerun, after = _fenced(lines, k)
                    if exp_lang != "text":
                        raise ValueError(f"{page} line {k + 1}: expected output must be a text block")
                out.append(Example(pending, body, expected, i + 1, page, rerun))
            pending = None
            i = after
            continue
        if line:
            pending = None
        i += 1
    names = [e.name for e in out]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"{page}: example names used twice: {sorted(duplicates)}")
    return out


def nav_pages() -> list[str]:
    """The site's pages in the order of mkdocs.yml's ``nav`` (paths relative to the repository)."""
    lines = (ROOT / "mkdocs.yml").read_text().splitlines()
    start = lines.index("nav:")
    out = []
    for line in lines[start + 1:]:
        if line and not line.startswith((" ", "-")):
            break  # the next top-level key
        m = re.search(r":\s*([\w./-]+\.md)\s*$", line)
        if m:
            out.append(f"docs/{m.group(1)}")
    return out


def page_examples(page: str) -> list[Example]:
    """The examples of one page (a path relative to the repository), in the page's order."""
    return _page_examples(page, (ROOT / page).read_text())


def options_tables(text: str | None = None) -> dict[str, list[OptionRow]]:
    """The options tables by format name (``<!-- options: NAME -->``), over every page."""
    lines = _lines(text)
    tables: dict[str, list[OptionRow]] = {}
    for i, line in enumerate(lines):
        m = _OPTIONS.match(line.strip())
        if not m:
            continue
        j = _next_nonblank(lines, i + 1) + 2  # header and separator rows
        rows = []
        while j < len(lines) and lines[j].startswith("|"):
            cells = [c.strip() for c in lines[j].strip().strip("|").split(" | ")]
            rows.append(OptionRow(tuple(_TICKED.findall(cells[0])), cells[1]))
            j += 1
        tables[m.group(1)] = rows
    return tables
