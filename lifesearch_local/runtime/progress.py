"""Progress bars on stderr (rich), with rates such as decisions/s; silent when not a TTY."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator


class _Bar:
    def __init__(self, progress, task_id, unit: str):
        self._p, self._id, self.unit = progress, task_id, unit
        self.start = time.perf_counter()
        self.done = 0
        self.extra: dict[str, float] = {}

    def advance(self, n: int = 1, **counters: float) -> None:
        self.done += n
        for k, v in counters.items():
            self.extra[k] = self.extra.get(k, 0.0) + v
        if self._p is not None:
            self._p.update(self._id, advance=n, rates=self.rates())

    def advance_to(self, done: int) -> None:
        """Move to `done` (never back): settles a count that finer-grained `advance` calls estimated."""
        if done > self.done:
            self.advance(done - self.done)

    def rates(self) -> str:
        dt = max(time.perf_counter() - self.start, 1e-9)
        parts = [f"{self.done / dt:.1f} {self.unit}s/s"]
        parts += [f"{v / dt:.0f} {k}/s" for k, v in self.extra.items()]
        return " · ".join(parts)


@contextlib.contextmanager
def progress_bar(total: int, *, desc: str = "", unit: str = "item", show: bool = True, already: int = 0) -> Iterator[_Bar]:
    """A progress bar showing done/total, the rate in `unit`s/s, extra counters' rates and ETA.

    `total` is the work left; `already` what an earlier run finished: a resumed run's bar starts at
    already/(already + total) and says "N already done", while the rates and `done` count new work."""
    desc = describe(desc, already)
    if not show or not sys.stderr.isatty():
        yield _Bar(None, None, unit)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rates]}"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as p:
        tid = p.add_task(desc, total=total + already, completed=already, rates="")
        yield _Bar(p, tid, unit)


def describe(desc: str, already: int) -> str:
    """The bar's label: `desc`, and on a resumed run how much an earlier run finished."""
    return f"{desc} ({already} already done)" if already else desc
