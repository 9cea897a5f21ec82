"""Request-time quotas (KIP-124) without a network: a handler's loop time counts its running steps and not its
waits, the quota manager throttles a percentage of one thread and caps the throttle at one window, and KafkaApis
answers throttle_time_ms and mutes the connection for a client over its request_percentage."""

import asyncio

from zkbroker.server.quota_manager import REQUEST, ClientQuotaManager
from zkbroker.server.request_time import RequestTime


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_handlers_loop_time_counts_its_steps_and_not_its_waits():
    clock = FakeClock()

    async def handler():
        clock.now += 0.010  # 10 ms of work
        await asyncio.sleep(0.05)  # a long poll: free
        clock.now += 0.005
        return "answer"

    async def other_client():
        await asyncio.sleep(0.01)
        clock.now += 1.0  # another request's second of work, while ours waits: not ours

    async def main():
        rt = RequestTime(clock)
        other = asyncio.ensure_future(other_client())
        result = await rt.timed(handler())
        await other
        return rt, result

    rt, result = asyncio.run(main())
    assert result == "answer" and abs(rt.seconds() - 0.015) < 1e-9


def test_a_handlers_exception_and_cancellation_pass_through_with_the_time_counted():
    clock = FakeClock()

    async def failing():
        clock.now += 0.002
        raise ValueError("bad request")

    async def waiting_forever():
        clock.now += 0.001
        await asyncio.Event().wait()

    async def main():
        rt = RequestTime(clock)
        try:
            await rt.timed(failing())
        except ValueError as e:
            assert str(e) == "bad request"
        task = asyncio.ensure_future(rt.timed(waiting_forever()))
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return rt

    assert abs(asyncio.run(main()).seconds() - 0.003) < 1e-9


def test_a_request_percentage_is_a_share_of_one_thread_and_its_throttle_is_capped_at_one_window():
    manager = ClientQuotaManager(REQUEST, samples=11, window_s=1.0, max_throttle_ms=1000)
    manager.update({("alice", None): {REQUEST: "10"}})  # 10 % of a thread: 1 s of handler time per 10 s
    assert manager.active
    assert manager.record("alice", "app", 50.0, now=0.0) == 0  # 500 ms = 50 percent-seconds, over the 10 s span
    # 1500 ms over 10 s is 15 %, 1.5x the bound: (15 - 10) / 10 * 10 s = 5 s, capped at the 1 s window
    assert manager.record("alice", "app", 100.0, now=0.5) == 1000
    assert manager.record("bob", "app", 1000.0, now=0.5) == 0  # no quota for bob
    manager.update({("alice", None): {"producer_byte_rate": "1"}})
    assert not manager.active
