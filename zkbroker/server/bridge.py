"""The one bridge between kazoo's threads and the broker's asyncio loop (DESIGN §9).

kazoo completes requests and fires watches on its own threads; the network server lives on an asyncio
loop that must never block. Everything that crosses from those threads to the loop goes through here,
by `loop.call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class LoopBridge:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) on the loop, from any thread."""
        self.loop.call_soon_threadsafe(fn, *args)

    def wait_for(self, async_result: Any) -> asyncio.Future:
        """An asyncio future for a kazoo IAsyncResult (from `create_async`, `get_async`, ...)."""
        future = self.loop.create_future()

        def completed(result: Any) -> None:  # a kazoo thread
            try:
                value, error = result.get_nowait(), None
            except Exception as e:  # the ZooKeeper error travels to the awaiting coroutine
                value, error = None, e
            self.loop.call_soon_threadsafe(_settle, future, value, error)

        async_result.rawlink(completed)
        return future


def _settle(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
