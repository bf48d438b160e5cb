"""Process titles and command lines: the one parser of what a title says (pure, no I/O).

SGLang and vLLM name their processes with setproctitle (``sglang::scheduler_DP1_TP1``,
``VLLM::Worker_TP0``, ``VLLM::EngineCore_DP0``), Ray names actors ``ray::Class.method``: the
titles themselves are the frameworks' own (hangscope/frameworks/), read here.
Discovery (collect/tree.py, which may not import the analysis) climbs with
:func:`looks_like_python` and :func:`looks_like_worker`; the roles and the rank identity
(analyze/evidence/roles.py, analyze/evidence/identity.py) read coordinates with
:func:`title_coordinates`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from hangscope.frameworks import LAUNCHERS, TITLE_PREFIXES, helper_role
from hangscope.frameworks.multiprocessing import SPAWNED
from hangscope.frameworks.ray import NO_ACTOR
from hangscope.frameworks.ray import TITLE as RAY
from hangscope.frameworks.sglang import SCHEDULER_TITLE as SGLANG_SCHED
from hangscope.frameworks.vllm import TITLE as VLLM_TITLE

# Longest names first: MOE_DP before DP, ATTN_CP before CP (no other axis ends like them).
_FIELD = re.compile(r"(?:^|_)(ATTN_CP|MOE_DP|MOE_EP|DCP|PCP|DP|PP|TP|EP|CP)(\d+)(?=_|$)")
_TITLED = re.compile(r"^(?:sglang::scheduler|[A-Za-z0-9_]+::(?:Worker|EngineCore))(?P<rest>\S*)")


def title_of(cmdline: Sequence[str]) -> str:
    """The command line as one string: for a titled process, its title."""
    return " ".join(cmdline)


def title_coordinates(title: str | None) -> dict[str, int]:
    """Every coordinate in an SGLang/vLLM process title, in any field order, by lower-case
    axis (``dp``, ``tp``, ``attn_cp``, ``moe_ep``...)."""
    if not title:
        return {}
    m = _TITLED.match(title)
    if not m:
        return {}
    out: dict[str, int] = {}
    for name, value in _FIELD.findall(m.group("rest")):
        out.setdefault(name.lower(), int(value))
    return out


def ray_actor(title: str) -> str | None:
    """``ray::Trainer.train`` -> ``Trainer.train``: the actor (and method) a Ray worker runs."""
    m = RAY.match(title)
    if m is None or m.group("actor") in NO_ACTOR:
        return None
    return m.group("actor") + (f".{m.group('method')}" if m.group("method") else "")


def looks_like_python(cmdline: Sequence[str]) -> bool:
    """A Python process, by argv[0] or a known title (setproctitle hides argv[0])."""
    if not cmdline:
        return False
    head = cmdline[0].split(" ", 1)[0].rsplit("/", 1)[-1]  # a title's first word
    title = title_of(cmdline)
    return (
        head.startswith("python")
        or head in LAUNCHERS or head == "pytest"
        or bool(SGLANG_SCHED.match(title))
        or title.startswith(TITLE_PREFIXES)
        or bool(VLLM_TITLE.match(title))
    )


def is_spawned_child(cmdline: Sequence[str]) -> bool:
    title = title_of(cmdline)
    return any(word in title for word in SPAWNED)


def looks_like_worker(cmdline: Sequence[str], environ: Mapping[str, str],
                      parent_cmdline: Sequence[str]) -> bool:
    """Whether a process is a worker of its parent's job (so discovery climbs past it)."""
    title = title_of(cmdline)
    if title.startswith(TITLE_PREFIXES) or VLLM_TITLE.match(title):
        return True
    if "RANK" in environ or "LOCAL_RANK" in environ or "TORCHELASTIC_RUN_ID" in environ:
        return True
    if is_spawned_child(cmdline) or helper_role(title) is not None:
        return True
    if "compile_worker" in title:
        return True
    # A forked child keeps its parent's argv.
    return bool(cmdline) and tuple(cmdline) == tuple(parent_cmdline)
