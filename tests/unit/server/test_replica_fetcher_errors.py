"""A fetcher that meets an error it did not expect (a bug, a refused append) logs it and fetches again after the
backoff, as 0.8.2's fetcher thread did, instead of ending silently and leaving its partitions unreplicated."""

from __future__ import annotations

import asyncio
import logging

from zkbroker.config import KafkaConfig
from zkbroker.server import replica_fetcher
from zkbroker.server.replica_fetcher import ReplicaFetcher, SourceBroker


def test_an_unexpected_error_is_logged_and_the_fetcher_goes_on(monkeypatch, caplog):
    monkeypatch.setattr(replica_fetcher, "ERROR_BACKOFF_S", 0.0)

    async def scenario() -> int:
        config = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "zk:2181"})
        fetcher = ReplicaFetcher(config, SourceBroker(2, "127.0.0.1", 1))
        rounds = []
        went_on = asyncio.Event()

        async def fetch_once() -> None:
            rounds.append(1)
            if len(rounds) == 1:
                raise ValueError("out-of-order append")
            went_on.set()
            await asyncio.sleep(3600)

        fetcher._fetch_once = fetch_once
        fetcher.partitions["anything"] = object()  # a partition to fetch, so the loop runs
        fetcher._wake.set()
        await asyncio.wait_for(went_on.wait(), 10)
        await fetcher.stop()
        return len(rounds)

    with caplog.at_level(logging.ERROR, logger=replica_fetcher.log.name):
        assert asyncio.run(scenario()) == 2
    assert "Error in fetch from broker 2" in caplog.text and "ValueError: out-of-order append" in caplog.text
