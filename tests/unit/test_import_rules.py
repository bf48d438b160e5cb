"""The layering holds: which package may import which, read from the source with ast.

- model/ imports nothing of hangscope outside itself (pure data); analyze/, render/, tui/
  never import collect/, the sampler, discovery or the round merge (they work on Snapshots,
  never on a live process);
- render/ and tui/ never import analyze/ (facts they show live on the model, words in words.py);
- collect/ never imports analyze/, render/ or tui/ (collectors record, the analysis judges);
- remote/ never imports commands/ or the CLI (it takes typed requests);
- /proc is opened only by collect/procfs.py;
- no import cycle between hangscope's modules, counting imports inside functions and modules
  named to ``importlib.import_module("...")`` (an f-string names its package).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from support import REPO_ROOT

PACKAGE = REPO_ROOT / "hangscope"
LIVE = ("hangscope.collect", "hangscope.live", "hangscope.remote", "hangscope.commands",
        "hangscope.cli")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, typing: bool = False) -> Iterator[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every hangscope import in ``path``; with
    ``typing``, the imports under ``if TYPE_CHECKING:`` too."""
    return imports_of(path, module_name(path), typing)


def imports_of(path: Path, name: str, typing: bool = False) -> Iterator[tuple[str, int, bool]]:
    """:func:`imports` of a file that is module ``name``."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(node) for node in tree.body}
    guarded = {id(n) for node in tree.body if isinstance(node, ast.If)
               and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if id(node) in guarded and not typing:
            continue  # typing only: never runs
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        if _is_import_module(node):
            names = [_import_module_target(node)]
        for name in names:
            if name == "hangscope" or name.startswith("hangscope."):
                yield name, node.lineno, id(node) in top


def _is_import_module(node: ast.AST) -> bool:
    """``importlib.import_module(...)`` or ``import_module(...)`` with a literal module name."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = ast.unparse(node.func)
    return func in ("importlib.import_module", "import_module") and isinstance(
        node.args[0], (ast.Constant, ast.JoinedStr))


def _import_module_target(node: ast.Call) -> str:
    """The module a literal names; an f-string ``f"hangscope.commands.{name}"``: its package."""
    arg = node.args[0]
    if isinstance(arg, ast.Constant):
        return str(arg.value)
    assert isinstance(arg, ast.JoinedStr)
    head = arg.values[0].value if arg.values and isinstance(arg.values[0], ast.Constant) else ""
    return str(head).rstrip(".")


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module an import name refers to (``from pkg import mod`` names a module too)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def violations(importer_prefixes: tuple[str, ...], banned: tuple[str, ...]) -> list[str]:
    found = []
    for mod, path in modules().items():
        if not mod.startswith(importer_prefixes):
            continue
        for name, line, _ in imports(path):
            if name.startswith(banned):
                found.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {name}")
    return sorted(set(found))


def test_model_imports_only_pure_data() -> None:
    """The model package imports nothing of hangscope outside itself (its codec's error type
    aside), and the records imports nothing of hangscope at all (pure data)."""
    found = violations(("hangscope.model",), ("hangscope",))
    assert [line for line in found if " imports hangscope.model" not in line
            and not line.endswith(" imports hangscope")  # `from hangscope import model`
            and " imports hangscope.errors" not in line] == []
    assert violations(("hangscope.model.nccl", "hangscope.model.progress",
                       "hangscope.model.waits", "hangscope.model.kernels"),
                      ("hangscope",)) == []


#: Analyses that still import a record *type* from a collector (being written now, issue 11
#: and 13): the types belong in hangscope/model/. This list may only shrink.
PENDING: set[tuple[str, str]] = set()


def test_analysis_rendering_and_tui_never_touch_a_live_process() -> None:
    known = modules()
    found = set()
    for line in violations(("hangscope.analyze", "hangscope.render", "hangscope.tui",
                            "hangscope.model", "hangscope.words", "hangscope.model.nccl",
                            "hangscope.model.categories"), LIVE):
        path, _, name = line.partition(" imports ")
        found.add((module_name(REPO_ROOT / path.split(":")[0]), resolve(name, known) or name))
    assert found - PENDING == set(), "new imports of live code from pure code"
    assert PENDING - found == set(), "fixed: take these out of PENDING"


#: Collectors that still judge (import the analysis), each with who removes it (issue 18,
#: item 2). This list may only shrink; a new collector importing analyze/ fails at once.
COLLECT_PENDING: dict[str, str] = {
}


def test_collectors_record_and_never_judge() -> None:
    """collect/ never imports analyze/, render/ or tui/ (only the PENDING ones, for now)."""
    found = violations(("hangscope.collect",), ("hangscope.analyze", "hangscope.render",
                                                 "hangscope.tui"))
    files = {line.split(":")[0] for line in found}
    assert files - set(COLLECT_PENDING) == set(), found
    assert set(COLLECT_PENDING) - files == set(), "fixed: take these out of COLLECT_PENDING"


def test_remote_never_imports_the_commands_or_the_cli() -> None:
    """The fan-out takes a typed request: it never reaches up into commands/ or the CLI."""
    assert violations(("hangscope.remote",), ("hangscope.commands", "hangscope.cli")) == []


#: Files that still open /proc themselves, with who moves the reads into collect/procfs.py.
PROC_PENDING: dict[str, str] = {
    "hangscope/collect/flightrec.py": "frtrace",  # /proc/PID/{root,cwd} and its owner
    "hangscope/collect/locks.py": "graph",  # /proc/locks (its proc= root is a test seam)
    "hangscope/collect/tree.py": "waits",  # /proc/PID/{exe,stat} of the climb
    "hangscope/live/discover.py": "waits",  # /proc/PID/comm
}
_PROC_PATH = re.compile(r"""["'](?:/proc/|/proc["'])|f["']/proc""")


def _code_strings(path: Path) -> Iterator[ast.Constant | ast.JoinedStr]:
    """The string literals of ``path``'s code: every one but the docstrings."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr)}
    for node in ast.walk(tree):
        if id(node) not in docs and isinstance(node, (ast.Constant, ast.JoinedStr)):
            yield node


def test_proc_is_read_only_by_procfs() -> None:
    """Code outside collect/procfs.py names no /proc path (docstrings and comments may)."""
    found = set()
    for mod, path in modules().items():
        if mod == "hangscope.collect.procfs":
            continue
        for node in _code_strings(path):
            text = ast.unparse(node)
            if _PROC_PATH.search(text) and "/proc/PID" not in text:
                found.add(str(path.relative_to(REPO_ROOT)))
    assert found - set(PROC_PENDING) == set(), "read /proc through collect/procfs.py"
    assert set(PROC_PENDING) - found == set(), "fixed: take these out of PROC_PENDING"


def test_render_and_tui_take_facts_from_the_model_not_from_analyze() -> None:
    assert violations(("hangscope.render", "hangscope.tui"), ("hangscope.analyze",)) == []


def test_no_import_cycle() -> None:
    """No circle, not even through an import for type hints alone (a circle of types is a
    circle of ideas: one of the two modules holds what both need)."""
    known = modules()
    graph: dict[str, set[str]] = {mod: set() for mod in known}
    for mod, path in known.items():
        for name, _, _ in imports(path, typing=True):
            target = resolve(name, known)
            # A package's __init__ is imported on the way to its modules: not an edge of its own.
            if target is not None and target != mod and not mod.startswith(target + "."):
                graph[mod].add(target)
    cycles = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(mod: str) -> None:
        state[mod] = 1
        stack.append(mod)
        for nxt in sorted(graph[mod]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod)
    assert cycles == []


def test_the_checker_sees_real_imports() -> None:
    """The rules above can fail: the sampler does import the collectors and the analysis, and
    the CLI names its commands to importlib."""
    names = {name for name, _, _ in imports(PACKAGE / "live/sampler.py")}
    assert "hangscope.collect.procfs" in names or "hangscope.collect" in names
    assert violations(("hangscope.live.sampler",), ("hangscope.analyze",)) != []
    assert "hangscope.commands" in {name for name, _, _ in imports(PACKAGE / "cli.py")}


def test_importlib_strings_make_edges(tmp_path: Path) -> None:
    """A module named to importlib.import_module is an import like any other."""
    src = tmp_path / "m.py"
    src.write_text('import importlib\nimportlib.import_module("hangscope.tui.app")\n'
                   'from importlib import import_module\nimport_module(f"hangscope.render.{x}")\n')
    names = {name for name, _, _ in imports_of(src, "hangscope.m")}
    assert {"hangscope.tui.app", "hangscope.render"} <= names


#: analyze/'s wings, lowest first: a wing imports only its own and the wings below it.
#: findings/ stands beside rules/: both read the lower wings, neither reads the other.
WINGS = ("evidence", "graph", "patterns", "rules")
BESIDE = {"findings": "rules"}


def _wing(mod: str) -> str | None:
    parts = mod.split(".")
    if parts[:2] != ["hangscope", "analyze"] or len(parts) < 4:
        return None  # analyze/'s own modules (the pipeline: verdict, readings, merge) are free
    return parts[2]


def test_analyze_wings_import_only_downward() -> None:
    """evidence <- graph <- patterns <- rules, findings beside rules; every analyze module
    lives in a wing (or is one of the pipeline's few steps at analyze/'s top)."""
    known = modules()
    rank = {w: i for i, w in enumerate(WINGS)} | {k: WINGS.index(v) for k, v in BESIDE.items()}
    wings = {_wing(m) for m in known} - {None}
    assert wings == set(rank), f"a wing without a place in the order: {wings - set(rank)}"
    found = []
    for mod, path in known.items():
        here = _wing(mod)
        if here is None:
            continue
        for name, line, _ in imports(path, typing=True):
            target = resolve(name, known)
            there = _wing(target) if target else None
            if target is None or not target.startswith("hangscope.analyze"):
                continue
            where = f"{path.relative_to(REPO_ROOT)}:{line} imports {target}"
            if there is None and target != "hangscope.analyze":
                found.append(where + " (a pipeline step above every wing)")
            elif there is not None and (rank[there] > rank[here]
                                        or (there != here and rank[there] == rank[here])):
                found.append(where)
    assert found == []


def test_the_wing_check_can_fail(tmp_path: Path) -> None:
    """An evidence module importing the walk of the graph is seen (the check reads imports)."""
    src = tmp_path / "m.py"
    src.write_text("from hangscope.analyze.graph.waitwalk import Graph\n")
    names = {name for name, _, _ in imports_of(src, "hangscope.analyze.evidence.m")}
    assert "hangscope.analyze.graph.waitwalk.Graph" in names
    assert _wing("hangscope.analyze.graph.waitwalk") == "graph"
    assert _wing("hangscope.analyze.verdict") is None


def test_no_folder_holds_more_than_25_modules() -> None:
    """A newcomer can read a folder's listing: packages of at most 25 modules."""
    crowded = {str(d.relative_to(REPO_ROOT)): n for d in [PACKAGE, *PACKAGE.rglob("*")]
               if d.is_dir() and (n := len(list(d.glob("*.py")))) > 25}
    assert crowded == {}


def test_frameworks_are_pure_and_read_by_collect_and_analyze_alike() -> None:
    """hangscope/frameworks/ is data about frameworks: it imports only the model (collect/ and
    analyze/ both read it, so it may import neither)."""
    found = [line for line in violations(("hangscope.frameworks",), ("hangscope",))
             if " imports hangscope.model" not in line
             and " imports hangscope.frameworks" not in line]
    assert found == []


#: Words that name a framework's process titles or launchers: they live in frameworks/.
_FRAMEWORK_TITLES = re.compile(r"""["'](?:sglang::|VLLM::|ray::|raylet|gcs_server|"""
                               r"""resource_tracker|pt_data_worker|torchrun|deepspeed)""")


def test_framework_titles_are_named_only_in_frameworks() -> None:
    """No module outside hangscope/frameworks/ names a framework's titles or helper processes
    in its code (docstrings and comments may); the signature table's frames are its own, and
    the model's Role values are names, not matches."""
    found = set()
    for mod, path in modules().items():
        if mod.startswith(("hangscope.frameworks", "hangscope.model")) or mod in _SIGNATURE_TABLES:
            continue
        for node in _code_strings(path):
            if isinstance(node, ast.Constant) and isinstance(
                    node.value, str) and _FRAMEWORK_TITLES.search(repr(node.value)):
                found.add(f"{path.relative_to(REPO_ROOT)}: {node.value[:40]!r}")
    assert sorted(found) == []


#: Tables of frames and commands that still name libraries' files (the signature table and
#: the demos that start real jobs).
_SIGNATURE_TABLES = {"hangscope.analyze.evidence.signatures", "hangscope.demo"}
