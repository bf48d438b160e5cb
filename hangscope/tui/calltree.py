"""The merged call tree: every rank's working stack in one tree, forks where ranks diverge.

A run of frames that the same ranks share is folded into one node, labelled with its innermost
frame; expanding its "call path" child lists the frames of the run. Nodes open down to where
the ranks diverge; the frames inside each run stay folded until asked for.
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Tree
from textual.widgets.tree import TreeNode as WidgetNode

from hangscope.model import Role, Snapshot, TreeNode, rank_id
from hangscope.words import compact_ranks


def fold_chain(node: TreeNode) -> tuple[list[TreeNode], tuple[TreeNode, ...]]:
    """The run of single-child nodes from ``node`` down (outermost first), and the fork below."""
    chain = [node]
    while len(chain[-1].children) == 1:
        chain.append(chain[-1].children[0])
    return chain, chain[-1].children


class CallTree(Tree[None]):
    """A Tree over ``Snapshot.call_tree``; suspect ranks' branches in red."""

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)

    def __init__(self, **kwargs: object) -> None:
        super().__init__("call tree", **kwargs)  # type: ignore[arg-type]
        self.show_root = False
        self.guide_depth = 3
        self._shape: object = None

    def watch_snapshot(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        # Rebuild only when the tree changed, so a refresh keeps what the user opened.
        shape = (snap.call_tree, self._suspects(snap))
        if shape == self._shape:
            return
        self._shape = shape
        self.clear()
        is_rank = any(p.role is Role.RANK and p.rank is not None for p in snap.processes)
        suspects = self._suspects(snap)
        if not snap.call_tree:
            self.root.add_leaf(Text("No stacks were sampled.", style="dim"))
        for node in snap.call_tree:
            self._add(self.root, node, is_rank, suspects)
        self.root.expand()

    @staticmethod
    def _suspects(snap: Snapshot) -> frozenset[int]:
        if snap.verdict is None:
            return frozenset()
        return frozenset(rank_id(p) for p in snap.suspect_processes)

    def _add(self, parent: WidgetNode[None], node: TreeNode, is_rank: bool,
             suspects: frozenset[int]) -> None:
        chain, fork = fold_chain(node)
        who = compact_ranks(node.ranks)
        if not is_rank:
            who = f"PID {who}"
        odd = bool(suspects) and set(node.ranks) <= suspects
        label = Text()
        label.append(f"{who} ", style="bold red" if odd else "bold")
        label.append(chain[-1].frame, style="red" if odd else "")
        if len(chain) > 1:
            label.append(f"  ({len(chain)} frames)", style="dim")
        branch = parent.add(label, expand=True)
        if len(chain) > 1:
            path = branch.add(Text(f"{len(chain)} frames from {chain[0].frame}",
                                   style="dim italic"), expand=False)
            for link in chain:
                path.add_leaf(Text(link.frame, style="dim"))
        for child in fork:
            self._add(branch, child, is_rank, suspects)
        if len(chain) == 1 and not fork:
            branch.allow_expand = False
