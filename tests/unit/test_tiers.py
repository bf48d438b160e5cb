"""The quick tier keeps a case of every real-process module (docs/architecture.md, "Tiers").

``@pytest.mark.extended`` moves a test out of the README's command into the tier CI runs
after it. A module whose every test is extended would leave its mechanism unchecked in a
contributor's loop: each test module under tests/integration, tests/tui and tests/scale keeps
at least one test that is not extended (modules of slow soaks or GPU tests only are theirs).
Modules of one ``xdist_group`` share one fixture that runs alone (the namespace cluster): one
mechanism, so one of them with a quick case is enough.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support import REPO_ROOT

TIERED = ("integration", "tui", "scale")


def _marks(node: ast.AST) -> set[str]:
    """The ``pytest.mark.NAME`` decorators of a test function, and its module's."""
    out = set()
    for deco in getattr(node, "decorator_list", []):
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute) \
                and target.value.attr == "mark":
            out.add(target.attr)
    return out


def _group(tree: ast.Module) -> str | None:
    """The module's ``xdist_group("NAME")`` in its pytestmark, if any."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "xdist_group" and node.args \
                and isinstance(node.args[0], ast.Constant):
            return str(node.args[0].value)
    return None


def _module_marks(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute)
                    and n.attr not in ("mark", "pytest")}
    return set()


def quick_cases(path: Path) -> tuple[int, int]:
    """(tests in the default run, tests in all) of one test module."""
    tree = ast.parse(path.read_text())
    module = _module_marks(tree)
    tests = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and n.name.startswith("test_")]
    quick = [t for t in tests if not (_marks(t) | module) & {"extended", "slow", "gpu"}]
    return len(quick), len(tests)


def test_every_real_process_module_keeps_a_quick_case() -> None:
    bare = []
    groups: dict[str, list[tuple[str, int]]] = {}
    for tier in TIERED:
        for path in sorted((REPO_ROOT / "tests" / tier).rglob("test_*.py")):
            quick, tests = quick_cases(path)
            tree = ast.parse(path.read_text())
            only_slow = all((_marks(n) | _module_marks(tree)) & {"slow", "gpu"}
                            for n in tree.body if isinstance(n, (ast.FunctionDef,
                                                                 ast.AsyncFunctionDef))
                            and n.name.startswith("test_"))
            name = str(path.relative_to(REPO_ROOT))
            if (group := _group(tree)) is not None:
                groups.setdefault(group, []).append((name, quick))
            elif tests and not quick and not only_slow:
                bare.append(name)
    bare += [f"{group}: {[n for n, _ in members]}" for group, members in groups.items()
             if not any(quick for _, quick in members)]
    assert bare == [], f"keep one quick (not extended) test in each of {bare}"


def test_an_all_extended_module_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "test_x.py"
    path.write_text("import pytest\n@pytest.mark.extended\ndef test_a(): pass\n"
                    "@pytest.mark.extended\n@pytest.mark.quiet\ndef test_b(): pass\n")
    assert quick_cases(path) == (0, 2)
    path.write_text("import pytest\ndef test_a(): pass\n@pytest.mark.extended\n"
                    "def test_b(): pass\n")
    assert quick_cases(path) == (1, 2)
