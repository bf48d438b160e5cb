"""No module in hangscope/ grows past ~400 lines without saying why it is one file.

A long module is either split where a seam is obvious, or its docstring has a line starting
"Why one file:" that gives the reason (model/__init__.py: the JSON contract in one place).
"""

from __future__ import annotations

import ast
from pathlib import Path

from support import REPO_ROOT

LIMIT = 400
MARK = "Why one file:"


def reason(source: str) -> str | None:
    """The "Why one file:" paragraph of a module's docstring, if it has one."""
    doc = ast.get_docstring(ast.parse(source)) or ""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(MARK):
            paragraph = [line]
            for more in lines[i + 1:]:
                if not more.strip():
                    break
                paragraph.append(more)
            return " ".join(paragraph)[len(MARK):].strip()
    return None


def unexplained(root: Path) -> list[str]:
    """Modules under ``root`` over LIMIT lines whose docstring gives no reason."""
    found = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        lines = source.count("\n")
        if lines > LIMIT and not reason(source):
            found.append(f"{path.relative_to(root)}: {lines} lines")
    return found


def test_every_long_module_says_why_it_is_one_file() -> None:
    assert unexplained(REPO_ROOT / "hangscope") == [], (
        f"split these modules, or add a line starting {MARK!r} to their docstring")


def test_a_long_module_without_a_reason_is_caught(tmp_path: Path) -> None:
    """The check reads a real reason: a bare mark, or one outside the docstring, is none."""
    body = "x = 1\n" * LIMIT
    (tmp_path / "bare.py").write_text('"""Doc.\n\nWhy one file:\n"""\n' + body)
    (tmp_path / "comment.py").write_text('"""Doc."""\n# Why one file: not the docstring\n' + body)
    (tmp_path / "short.py").write_text('"""Doc."""\n' + "x = 1\n" * (LIMIT - 1))
    (tmp_path / "kept.py").write_text('"""Doc.\n\nWhy one file: one contract.\n"""\n' + body)
    assert [line.split(":")[0] for line in unexplained(tmp_path)] == ["bare.py", "comment.py"]
    model = (REPO_ROOT / "hangscope" / "model/__init__.py").read_text()
    assert "JSON contract" in (reason(model) or "")
