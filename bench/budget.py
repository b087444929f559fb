"""The CPU budget of `mmfeed bench`: the cores this process may use, pinning it (and the children
it starts) to fewer, the counts a sweep tries, and which of mmfeed's stages run on one thread.

    cores = budget.cores_available()    # as workers="auto" counts them: affinity, cgroup v2 quota
    budget.pin(2)                       # this process and every child started after: 2 cores
    budget.doubling(6)                  # [1, 2, 4, 6]
    budget.single_thread_stages(loader.metrics()["stages"])   # the stages marked "threads": 1

Every system in the benchmark gets the same budget: its workers (DataLoader num_workers, SPDL's
processing concurrency, mmfeed's workers) and the cores it may run on.
"""

from __future__ import annotations

import os

from mmfeed._mmfeed import cgroup_cpu_limit, usable_cpus  # noqa: F401  (the report names the limit)


def cores_available() -> int:
    """The cores this process may use, counted as the engine counts them for workers="auto": its CPU
    affinity, capped by the smallest cgroup v2 cpu.max quota from its cgroup up to the root."""
    return usable_cpus()


def pin(cores: int) -> list[int]:
    """Restricts this process, and the children it starts from now on, to the first `cores` of
    the CPUs it may use; returns them. Raises ValueError when it may use fewer."""
    allowed = sorted(os.sched_getaffinity(0))
    if not 1 <= cores <= len(allowed):
        raise ValueError(
            f"cannot pin to {cores} cores: this process may use {len(allowed)} (CPUs {','.join(map(str, allowed))})"
        )
    os.sched_setaffinity(0, allowed[:cores])
    return allowed[:cores]


def doubling(up_to: int) -> list[int]:
    """1, 2, 4, ... below `up_to`, then `up_to` itself: the worker or core counts a sweep tries."""
    counts = [1]
    while counts[-1] * 2 < up_to:
        counts.append(counts[-1] * 2)
    return counts + [up_to] if up_to > 1 else counts


def single_thread_stages(stages: dict) -> list[str]:
    """The stages of mmfeed's metrics()["stages"] that run on one thread: those marked
    "threads": 1 where the engine marks stages, else "assemble" (the batcher's). Read them from a
    run with more than one worker: with one, the worker pool's stages are on one thread too.
    Waits ("consumer_wait") are time a thread spends idle, not work, and never count."""
    named = {name: stage for name, stage in stages.items() if isinstance(stage, dict)}
    if any("threads" in stage for stage in named.values()):
        return [name for name, stage in named.items() if stage.get("threads") == 1 and not name.endswith("_wait")]
    return [name for name in ("assemble",) if name in named]


def serial_share(runs: list[dict]) -> None:
    """Adds to each of one system's runs (figures with "stages", "cpu_seconds" and "workers", as
    the benchmark's children report them) the single-threaded share of its CPU time and the
    Amdahl ceiling it implies (1 / share: the most any number of workers can speed it up; None
    when the share is 0). Which stages are single-threaded is read from the run with the most
    workers."""
    widest = max(runs, key=lambda run: run["workers"])
    single = single_thread_stages(widest["stages"])
    for run in runs:
        busy = sum(run["stages"][name]["busy_s"] for name in single if name in run["stages"])
        share = busy / max(run["cpu_seconds"], 1e-9)
        run.update(
            single_thread_stages=single,
            single_thread_busy_s=busy,
            single_thread_share=share,
            amdahl_ceiling=1 / share if share > 0 else None,
        )
