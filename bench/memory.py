"""The memory a benchmarked system holds: the sum of the proportional set sizes (PSS) of its
process and every process it started, sampled while it runs. RSS overstates what several
processes hold together (a page shared by a parent and its forked workers counts in each) and
RUSAGE_CHILDREN's peak understates it (it is the largest child's, not their sum); PSS counts a
shared page once, split between its sharers, so the figures of a one-process loader and of a
pool of worker processes compare.

    with memory.PeakPss() as peak:    # a thread samples every 50 ms
        run()
    peak.mb                           # the largest sum seen
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (through /proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                todo.extend(int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split())
        except OSError:
            continue  # ended meanwhile
    return out


def pss_kb(pid: int) -> int:
    """The process's proportional set size in kB (0 once it has ended)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class PeakPss:
    """Samples the PSS of this process's tree every `period` seconds while in the `with` block."""

    def __init__(self, period: float = 0.05):
        self.period = period
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pss-sampler", daemon=True)

    def sample(self) -> int:
        total = sum(pss_kb(p) for p in tree(os.getpid()))
        self.peak_kb = max(self.peak_kb, total)
        return total

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def __enter__(self) -> PeakPss:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    @property
    def mb(self) -> float:
        return self.peak_kb / 1024
