"""Python's cyclic garbage collector held off during one burst of work about thousands of partitions.

A controller decision or a LeaderAndIsr/StopReplica about 10,000 partitions allocates hundreds of thousands of
objects. Each allocation burst triggers collections, and the full ones scan the whole heap of a broker that
holds every partition's log: measured here, a third of the controller's CPU time for such an event and up to
~250 ms of a broker's. Nothing in these bursts builds reference cycles that must be freed at once; the
collector resumes when the burst ends (and catches up on its next allocation threshold).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collector off inside; back on afterwards if it was on before (bursts on other threads may overlap:
    whoever found it on turns it back on, so it never stays off)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
