"""What a Python frame's line says in a framework's words, from its source; parsed once per
file version, as collect/source.py parses.

- The rank tests it lies under: ``if trainer.is_global_zero:`` (hangscope/frameworks
  ``rank_tests``). A collective in such a block is called by the ranks that pass the test only
  (the tie-breaker of analyze/rules/tiebreak.py reads ``Frame.guards``).
- The methods it submits through a framework's handle: ``gate.release.remote(who)`` submits
  ``release`` (frameworks ``ObjectWait.submit``): a waiter's own call, which the method a
  producer has in flight may not be (analyze/patterns/ends/uncalled.py).
- The tests of every ``if`` it lies under (``Frame.branches``): a collective under a test of
  a rank's own data runs on the ranks whose data pass it only (analyze/rules/leftloop.py).
- The frameworks' object gets it calls with no timeout: ``ray.get(refs)`` (frameworks
  ``ObjectWait.calls``, whose timeout is keyword-only). Such a get returns only once its
  objects came, so a thread seen inside it and then past it got them
  (analyze/evidence/progress_sites.py reads ``Frame.untimed``).
"""

from __future__ import annotations

import ast
import os
import re

from hangscope.collect.source import Calls, _last_name, _parse, _per_version, call_names
from hangscope.diskcache import SourceCache
from hangscope.frameworks import RANK_DECORATORS, RANK_TESTS, SUBMITS, WAIT_CALLS
from hangscope.model import ELSE_OF, in_library

_block_cache = SourceCache("if-blocks")  # -> ((first, last, test, at, orelse, decorated), ...)
#: A test that names a rank (hangscope/frameworks ``rank_tests``).
_RANK_WORDS = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in RANK_TESTS) + r")\b")
#: The longest test text a branch is said with (a guard is said whole).
_BRANCH_CHARS = 120


def _blocks_of(source: bytes) -> tuple[tuple[int, int, str, int, bool, bool], ...]:
    """(first, last line, test text, the test's line, whether it is the else, whether it is a
    decorated function) of the body and of the else of each ``if``, and of the body of each
    function under a rank decorator (``rank_decorators``: ``"@rank_zero_only"``, its line):
    the blocks whose test decides whether a line in them runs. One parse serves the rank
    guards and the branches alike."""
    out = []
    tree = _parse(source)
    aliases = _rank_aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # A function decorated to run on some ranks only: its body is such a block.
            for deco in node.decorator_list:
                named = deco.func if isinstance(deco, ast.Call) else deco
                if ast.unparse(named).rsplit(".", 1)[-1] in RANK_DECORATORS and node.body:
                    last = node.body[-1].end_lineno or node.body[-1].lineno
                    out.append((node.body[0].lineno, last, f"@{ast.unparse(named)}",
                                deco.lineno, False, True))
        if isinstance(node, ast.If) and node.body:
            test = ast.unparse(node.test)
            named = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)} & set(aliases)
            if named and not _RANK_WORDS.search(test):  # said with the test it stands for
                test += " [" + "; ".join(f"{n} = {aliases[n]}" for n in sorted(named)) + "]"
            for block, orelse in ((node.body, False), (node.orelse, True)):
                if block:
                    last = block[-1].end_lineno or block[-1].lineno
                    out.append((block[0].lineno, last, test, node.lineno, orelse, False))
    return tuple(out)


def _rank_aliases(tree: ast.AST) -> dict[str, str]:
    """Names the file assigns a rank test to (``is_main = rank == 0``, ``main =
    accelerator.is_main_process``): an ``if is_main:`` tests the rank as much. A comparison
    or an attribute that names a rank test only (``seed = 1234 + rank`` is no test)."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name) and isinstance(node.value, (ast.Compare,
                                                                       ast.Attribute)):
            text = ast.unparse(node.value)
            if _RANK_WORDS.search(text) and (isinstance(node.value, ast.Compare)
                                             or node.value.attr.startswith("is_")):
                found[node.targets[0].id] = text
    return found


def _holding(path: str | None, line: int | None, rank: bool) -> tuple[str, ...]:
    """The tests of the blocks holding ``path:line``, outermost first, as "TEST (file:line)"
    (:data:`ELSE_OF` before a line in the else): the rank tests only (``rank``), else every
    ``if``'s."""
    if not path or not line:
        return ()
    found = _per_version(path, _block_cache, _blocks_of, ())
    name = os.path.basename(path)
    return tuple(f"{ELSE_OF if orelse else ''}{test if rank else test[:_BRANCH_CHARS]} "
                 f"({name}:{at})"
                 for first, last, test, at, orelse, decorated in sorted(found)
                 if first <= line <= last
                 and ((decorated or bool(_RANK_WORDS.search(test))) if rank else not decorated))


def rank_guards(path: str | None, line: int | None) -> tuple[str, ...]:
    """The rank tests of the ``if`` blocks holding ``path:line``, outermost first:
    ``("trainer.is_global_zero (train.py:23)",)``; a line in the ``else`` of one:
    ``"else of trainer.is_global_zero (train.py:23)"`` (:data:`ELSE_OF`). Its body runs on
    the ranks that pass the test only, its else on the others."""
    return _holding(path, line, rank=True)


def branch_tests(path: str | None, line: int | None) -> tuple[str, ...]:
    """The tests of every ``if`` block holding the program's own line ``path:line`` (libraries
    are not read), outermost first, as :func:`rank_guards` words them: a collective under
    one runs on the ranks whose values pass it only."""
    if path is None or in_library(path):
        return ()
    return _holding(path, line, rank=False)


_untimed_cache = SourceCache("untimed-calls")  # -> Calls


def untimed_calls(tree: ast.AST) -> Calls:
    """The functions each line calls with no ``timeout`` keyword, by their last name (a
    framework's get whose timeout is keyword-only, ``ray.get(refs)``, then waits until its
    objects come: its return is news, not a timer's tick). A ``**kwargs`` may carry a
    timeout: such a call is not known to have none."""
    return call_names(tree, _no_timeout)


def _no_timeout(call: ast.Call) -> bool:
    """No ``timeout`` keyword (a ``**kwargs`` may carry one: not known to have none)."""
    return not any(k.arg is None or "timeout" in k.arg for k in call.keywords)


#: The frameworks' get names as bytes: a file without any of them is not parsed for them.
_WAIT_WORDS = tuple(name.encode() for name in sorted(WAIT_CALLS))


def untimed_at(path: str | None, line: int | None) -> tuple[str, ...]:
    """The frameworks' object gets (``WAIT_CALLS``) the program's own line ``path:line`` calls
    with no timeout (:func:`untimed_calls`; libraries are not read), sorted."""
    if not path or not line or in_library(path):
        return ()
    return tuple(sorted(WAIT_CALLS & _untimed_of(path).get(line, frozenset())))


def _untimed_of(path: str) -> Calls:
    return _per_version(path, _untimed_cache, lambda source: untimed_calls(_parse(source))
                        if any(word in source for word in _WAIT_WORDS) else {}, {})


def untimed_in(path: object, loops: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """The lines of the innermost of the program's own ``loops`` ((first, last), outermost
    first) in ``path`` that call a framework's object get with no timeout, ascending."""
    if not path or not loops or in_library(str(path)):
        return ()
    found = _untimed_of(str(path))
    first, last = loops[-1]
    return tuple(sorted(line for line, calls in found.items()
                        if first <= line <= last and WAIT_CALLS & calls))


_receives_cache = SourceCache("receive-calls")  # -> Calls


def _receive(call: ast.Call) -> str | None:
    """The last name of a call that receives a message (recv*, receive*), else None."""
    name = _last_name(call)
    return name if name is not None and name.startswith(("recv", "receive")) else None


def receives_in(path: object, loops: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """The lines of the outermost of the program's own ``loops`` ((first, last), outermost
    first) in ``path`` that receive a message (:func:`_receive`), ascending."""
    if not path or not loops or in_library(str(path)):
        return ()
    found = _per_version(str(path), _receives_cache, lambda source: call_names(
        _parse(source), name_of=_receive) if b"recv" in source or b"receive" in source
        else {}, {})
    first, last = loops[0]
    return tuple(sorted(line for line in found if first <= line <= last))


#: Per file version, one parse: (the methods each line submits, those whose one result a
#: get with no timeout on the line waits for).
_submits_cache = SourceCache("submitted-methods")  # -> (Calls, Calls)


#: The handles' submit calls as bytes: a file without any of them is not parsed for them.
_SUBMIT_WORDS = tuple(f".{name}(".encode() for name in sorted(SUBMITS))


def _submitted(call: ast.Call) -> str | None:
    """M of an ``X.M.remote(...)`` call (``SUBMITS``), else None."""
    func = call.func
    return func.value.attr if (isinstance(func, ast.Attribute) and func.attr in SUBMITS
                               and isinstance(func.value, ast.Attribute)) else None


def _gets_one(call: ast.Call) -> bool:
    """A framework's get with no timeout whose first argument is one submitted call:
    ``ray.get(w.setup.remote(...))``, not ``ray.get([w.setup.remote() for w in ws])``."""
    return (_last_name(call) in WAIT_CALLS and bool(call.args)
            and isinstance(call.args[0], ast.Call) and _submitted(call.args[0]) is not None
            and _no_timeout(call))


def _submits_of(path: str) -> tuple[Calls, Calls]:
    def build(source: bytes) -> tuple[Calls, Calls]:
        if not any(w in source for w in _SUBMIT_WORDS):
            return {}, {}
        tree = _parse(source)
        return (call_names(tree, name_of=_submitted), call_names(
            tree, keep=_gets_one, name_of=lambda call: _submitted(call.args[0])))
    return _per_version(path, _submits_cache, build, ({}, {}))


def submitted_at(path: str | None, line: int | None) -> tuple[str, ...]:
    """The methods the program's own line ``path:line`` submits through a framework's handle
    (``actor.method.remote(...)``; libraries are not read), sorted."""
    if not _SUBMIT_WORDS or not path or not line or in_library(path):
        return ()
    return tuple(sorted(_submits_of(path)[0].get(line, frozenset())))


def got_alone_at(path: str | None, line: int | None) -> tuple[str, ...]:
    """The methods whose one result a get with no timeout on the program's own line
    ``path:line`` waits for (:func:`_gets_one`), sorted."""
    if not _SUBMIT_WORDS or not path or not line or in_library(path):
        return ()
    return tuple(sorted(_submits_of(path)[1].get(line, frozenset())))


def line_calls(path: str | None, line: int | None) -> dict[str, tuple[str, ...]]:
    """A program frame's framework calls (``Frame.untimed``, ``submits``, ``gets_one``,
    ``guarded_before``)."""
    return {"untimed": untimed_at(path, line), "submits": submitted_at(path, line),
            "gets_one": got_alone_at(path, line), "guarded_before": guarded_before(path, line)}


_guarded_cache = SourceCache("guarded-calls")  # -> ((call, line, test, at, end, first, last), ...)
#: The most calls said of the guarded blocks before one line (the nearest kept).
_GUARDED_MAX = 8


def _guarded_calls(source: bytes) -> tuple[tuple[str, int, str, int, int, int, int], ...]:
    """(the called function's text, its line, the rank test, the if's first and last line, the
    first and last line of the innermost loop or function holding that if) of each method call
    in the body of an ``if`` on the rank (``rank_tests``)."""
    out = []
    tree = _parse(source)

    def visit(node: ast.AST, scope: tuple[int, int]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef,
                                  ast.AsyncFunctionDef)):
                inner = (child.lineno, child.end_lineno or child.lineno)
            if isinstance(child, ast.If) and _RANK_WORDS.search(test := ast.unparse(child.test)):
                end = child.end_lineno or child.lineno
                out.extend((ast.unparse(call.func), call.lineno, test, child.lineno, end, *scope)
                           for stmt in child.body for call in ast.walk(stmt)
                           if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute))
            visit(child, inner)

    visit(tree, (1, 1 << 30))
    return tuple(out)


def guarded_before(path: str | None, line: int | None) -> tuple[str, ...]:
    """The method calls under an ``if`` on the rank that the program's own line ``path:line``
    comes after, in the same loop turn or function (the innermost loop or function holding
    both), as "CALL (file:line) under TEST (file:line)", nearest last: ``fabric.save
    (train.py:22) under ... fabric.is_global_zero (train.py:20)``. A collective the library
    runs inside such a call (Fabric.save's barrier) is one the other ranks never run, and pairs
    with their next one (analyze/rules/tiebreak.py)."""
    if not path or not line or in_library(path):
        return ()
    found = _per_version(path, _guarded_cache, _guarded_calls, ())
    scopes = [(first, last) for *_, first, last in found if first <= line <= last]
    if not scopes:
        return ()
    inner = max(scopes)  # the innermost scope holding the line that holds a guarded call
    name = os.path.basename(path)
    said = [f"{call} ({name}:{at}) under {test} ({name}:{test_at})"
            for call, at, test, test_at, end, first, last in sorted(found, key=lambda f: f[1])
            if (first, last) == inner and end < line]
    return tuple(said[-_GUARDED_MAX:])
