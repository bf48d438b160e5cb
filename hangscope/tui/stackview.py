"""The selected rank: its threads to pick from, its /proc facts, and the picked thread's stack."""

from __future__ import annotations

from collections import Counter

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.reactive import reactive
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from hangscope.model import Process, ProcessKey, Snapshot, Thread
from hangscope.render.text import CATEGORY_STYLE, stack_text
from hangscope.tui.history import EXITED_NOTE
from hangscope.words import fold_threads, size, who


def fds_summary(proc: Process) -> str:
    """``11 fds: 5 socket, 2 file, 2 pipe, …`` (``ls -l /proc/PID/fd`` by kind)."""
    if proc.num_fds is None:
        return "fds ?"
    kinds = sorted(proc.fds.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = ", ".join(f"{n} {kind}" for kind, n in kinds[:3])
    more = ", …" if len(kinds) > 3 else ""
    return f"{proc.num_fds} fds: {parts}{more}" if parts else f"{proc.num_fds} fds"


def facts_text(proc: Process, thread: Thread | None) -> Text:
    """Two lines: the process's /proc facts, then the picked thread's state and category."""
    text = Text()
    text.append(who(proc), style="bold")
    if proc.is_exited:
        text.append(" EXITED", style="bold red")
    else:
        main = next((t for t in proc.threads if t.tid == proc.pid), None)
        text.append(f" · {proc.state or '?'}")
        if main is not None and main.wchan:
            text.append(f" {main.wchan}")
    text.append(f" · {fds_summary(proc)}")
    if proc.rss is not None:
        text.append(f" · rss {size(proc.rss)}")
    if thread is not None:
        text.append("\n")
        working = thread.tid == proc.working_tid
        text.append("★ " if working else "", style="bold cyan")
        text.append(f"{thread.name or '?'} ({thread.tid})", style="bold")
        text.append(f" · {thread.state or '?'}")
        if thread.wchan:
            text.append(f" {thread.wchan}")
        if thread.category is not None:
            text.append(" · ")
            text.append(str(thread.category), style=CATEGORY_STYLE.get(thread.category, ""))
        if thread.op:
            text.append(f" {thread.op}", style="bold")
        if thread.python and thread.samples > 1:
            text.append(f" · same stack {thread.unchanged_samples}/{thread.samples} samples",
                        style="dim")
    return text


def notes_text(proc: Process, thread: Thread | None) -> Text:
    """What to read after the stack: the signature's hint and what could not be read."""
    text = Text()
    if proc.is_exited:
        text.append("The process exited; this is the last stack seen.\n", style="bold yellow")
    if thread is not None and thread.hint:
        text.append(f"{thread.hint}\n", style="italic")
    for error in proc.errors:
        if error != EXITED_NOTE:
            text.append(f"! {error}\n", style="yellow")
    text.rstrip()
    return text


def thread_label(thread: Thread, working: bool, count: int = 1, tid: bool = False) -> Text:
    """One entry of the thread list; ``count``: threads of the same stack it stands for;
    ``tid``: name its TID too (another entry has the same name)."""
    text = Text()
    text.append("★ " if working else "  ", style="bold cyan")
    text.append(thread.name or str(thread.tid),
                style="bold" if working else ("dim" if not thread.python or thread.helper
                                              else ""))
    if tid and thread.name and count == 1:
        text.append(f" {thread.tid}", style="dim")
    if count > 1:
        text.append(f" (x{count})", style="bold")
    if not thread.python:
        text.append(" ·n", style="dim")
    return text


class ThreadList(OptionList):
    """The threads of the selected process; ★ marks the working thread, ·n native-only ones."""


class StackPane(Horizontal):
    """Thread list on the left; facts and stack on the right."""

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.key: ProcessKey | None = None  # (host, PID) of the process shown
        self.tid: int | None = None
        self.native = True
        self.full_paths = False
        self._threads_shown: tuple[object, ...] = ()
        # What the stack was last scrolled for: a new sample of the same thread keeps the
        # user's scroll; a new process, thread or n/p view brings the call site into view.
        self._scrolled_for: tuple[object, ...] | None = None

    def compose(self) -> ComposeResult:
        yield ThreadList(id="threads")
        with VerticalScroll(id="stack-scroll"):
            yield Static(id="facts")
            yield Static(id="stack")
            yield Static(id="notes")

    @property
    def pid(self) -> int | None:
        """The PID of the process shown (its host: ``key``)."""
        return self.key[1] if self.key is not None else None

    def select(self, key: ProcessKey | None, tid: int | None = None) -> None:
        """Show the process of (host, PID) ``key``, thread ``tid`` (default: its working
        thread)."""
        if key != self.key:
            self.tid = None
        self.key = key
        if tid is not None:
            self.tid = tid
        self.redraw()

    def watch_snapshot(self) -> None:
        self.redraw()

    def _process(self) -> Process | None:
        if self.snapshot is None or self.key is None:
            return None
        return self.snapshot.find(self.key)

    def redraw(self) -> None:
        if not self.is_mounted:
            return
        proc = self._process()
        facts = self.query_one("#facts", Static)
        stack = self.query_one("#stack", Static)
        threads = self.query_one(ThreadList)
        if proc is None:
            facts.update(Text("Select a rank in the table above.", style="dim"))
            stack.update("")
            self.query_one("#notes", Static).update("")
            threads.clear_options()
            self._threads_shown = ()
            return
        if self.tid is None or all(t.tid != self.tid for t in proc.threads):
            self.tid = proc.working_tid or (proc.threads[0].tid if proc.threads else None)
        # The working thread first, then Python threads, helpers, and native-only ones.
        ordered = sorted(proc.threads, key=lambda t: (t.tid != proc.working_tid, not t.python,
                                                      t.helper))
        # Threads of one stack are one entry (966 idle pool threads: one line, "(x966)").
        folded = fold_threads(ordered)
        head_of = {m.tid: first.tid for first, members in folded for m in members}
        shown = (proc.key, proc.working_tid,
                 tuple((t.tid, t.name, t.python, t.helper, len(m)) for t, m in folded))
        if shown != self._threads_shown:
            self._threads_shown = shown
            threads.clear_options()
            names = Counter(t.name for t, _ in folded)
            threads.add_options([Option(thread_label(t, t.tid == proc.working_tid, len(m),
                                                     tid=names[t.name] > 1),
                                        id=str(t.tid)) for t, m in folded])
        if self.tid is not None:
            self.tid = head_of.get(self.tid, self.tid)
            index = threads.get_option_index(str(self.tid))
            if threads.highlighted != index:
                threads.highlighted = index
        thread = next((t for t in proc.threads if t.tid == self.tid), None)
        facts.update(facts_text(proc, thread))
        self.query_one("#notes", Static).update(notes_text(proc, thread))
        if thread is None:
            stack.update(Text("No threads were read.", style="dim"))
        else:
            body = stack_text(thread, native=self.native, full_paths=self.full_paths, limit=None)
            body.rstrip()
            stack.update(body)
            shown_for = (proc.key, thread.tid, self.native, self.full_paths)
            if shown_for != self._scrolled_for:
                self._scrolled_for = shown_for
                self._bring_site_into_view(thread, body)

    def _bring_site_into_view(self, thread: Thread, body: Text) -> None:
        """Scroll so the user's own line (the call site) is on screen: at 80x24 a waiting
        rank's native and library frames fill the pane and push it below the fold."""
        scroll = self.query_one("#stack-scroll", VerticalScroll)
        site = thread.site
        line = None
        if site:
            func = site.split(" (", 1)[0]
            lines = body.plain.splitlines()
            line = next((i for i, text in enumerate(lines) if text.strip() == site), None)
            if line is None:  # full paths: the same function, its place written longer
                line = next((i for i, text in enumerate(lines)
                             if text.strip().startswith(f"{func} (")), None)

        def scroll_now() -> None:
            if line is None:
                scroll.scroll_home(animate=False)
                return
            facts = self.query_one("#facts", Static).outer_size.height
            width = self.query_one("#stack", Static).content_region.width
            # Long frames wrap: count the screen rows of the lines above the site.
            above = body.split("\n")[:line]
            rows = sum(len(part.wrap(self.app.console, max(1, width))) for part in above)
            row = facts + rows  # the site's row inside the scrolled content
            height = scroll.scrollable_content_region.height
            # Leave it where it is when it is already on screen; else lead with the frame
            # above it (the library call it made, one line at most), the site second.
            above_site = len(above[-1].wrap(self.app.console, max(1, width))) if above else 0
            lead = 1 if above_site == 1 else 0
            scroll.scroll_to(y=0 if row < height else max(0, row - lead), animate=False)

        self.call_after_refresh(scroll_now)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option.id is not None and int(event.option.id) != self.tid:
            self.tid = int(event.option.id)
            self.redraw()
