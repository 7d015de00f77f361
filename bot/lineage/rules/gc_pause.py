"""Planning allocates without garbage cycles; the cyclic collector need not run meanwhile."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["without_cyclic_gc"]

P = ParamSpec("P")
R = TypeVar("R")


def without_cyclic_gc(function: Callable[P, R]) -> Callable[P, R]:
    """Run `function` with the cyclic garbage collector paused.

    A plan over 45,000 DAGs allocates ~100,000 small tuples and no reference cycles; each
    collection those allocations trigger scans the young objects and, every so often, the
    whole heap (the lineage index: millions of objects) for nothing, about a third of the
    plan's time. Reference counting still frees everything as usual; the collector resumes
    (and catches up) when the function returns. Pure functions without awaits only: no other
    task runs meanwhile.
    """

    @functools.wraps(function)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():
            return function(*args, **kwargs)
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            gc.enable()

    return paused
