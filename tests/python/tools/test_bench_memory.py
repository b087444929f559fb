"""bench/memory.py: the PSS of a process tree, its workers included, sampled at its peak."""

import multiprocessing
import os

import memory


def _hold(megabytes: int, ready, done) -> None:
    block = bytearray(megabytes << 20)
    for i in range(0, len(block), 4096):  # touched: resident
        block[i] = 1
    ready.set()
    done.wait(30)


def test_a_workers_memory_counts_in_the_tree():
    ctx = multiprocessing.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold, args=(64, ready, done))
    child.start()
    try:
        assert ready.wait(30)
        assert child.pid in memory.tree(os.getpid())
        with memory.PeakPss() as peak:
            total = peak.sample()  # the tree's sum now
            own = memory.pss_kb(os.getpid())
        # The child's 64 MiB of private pages are in the sum beside this process's own PSS
        # (read right after: what this process frees meanwhile is far below the 4 MiB margin).
        assert total - own >= 60 * 1024
        assert peak.peak_kb >= total
        assert memory.pss_kb(child.pid) >= 60 * 1024
    finally:
        done.set()
        child.join()
    assert memory.pss_kb(child.pid) == 0  # ended
