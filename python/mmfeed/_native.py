"""The engine's objects, let go of before the interpreter's teardown.

A Python object that holds a native one (a Loader's engine, a Tokenizer, an ImageProcessor,
LoaderInputs) and is still referenced at exit (a module-level Loader) was found alive by
nanobind's leak check at teardown whenever a daemon thread running Python code (tqdm's monitor,
a logger) was still alive, which printed "nanobind: leaked 1 instances! ...". Each holder registers here;
an atexit hook, which runs before the teardown, closes it and drops its native object.
"""

from __future__ import annotations

import atexit
import contextlib
import weakref

_holders: weakref.WeakSet = weakref.WeakSet()


def hold(holder) -> None:
    """Registers `holder`, whose `_release_native()` closes and drops its native object."""
    _holders.add(holder)


@atexit.register
def _release_all() -> None:
    for holder in list(_holders):
        with contextlib.suppress(Exception):  # at exit nobody is left to tell
            holder._release_native()
