"""The broker's SCRAM CredentialCache without ZooKeeper: a user is read once and then served from memory, an
absent user is remembered too, and a users change notification (`clear`) makes the next attempt read again --
also when it lands while a read is under way (that read is not cached)."""

import asyncio
from types import SimpleNamespace

from kazoo.exceptions import NoNodeError

from zkbroker.security.scram import make_credential
from zkbroker.server.channel_builders import CredentialCache
from zkbroker.zk.znodes import EntityConfig

ALICE = make_credential("SCRAM-SHA-256", "alice-secret")


class FakeZooKeeper:
    def __init__(self) -> None:
        self.users = {"alice": EntityConfig({"SCRAM-SHA-256": str(ALICE)}).encode()}
        self.reads = []
        self.kazoo = SimpleNamespace(get_async=self.get_async)
        self.during_read = None  # called while a read is under way

    def get_async(self, path):
        self.reads.append(path)
        if self.during_read is not None:
            self.during_read()
        user = path.rsplit("/", 1)[1]
        return self.users.get(user)


class FakeBridge:
    async def wait_for(self, data):
        if data is None:
            raise NoNodeError()
        return data, None


def test_a_user_is_read_once_until_a_change_clears_the_cache():
    zk = FakeZooKeeper()
    cache = CredentialCache(zk, FakeBridge())

    async def attempts():
        found = [await cache.lookup("SCRAM-SHA-256", "alice") for _ in range(100)]
        missing = [await cache.lookup("SCRAM-SHA-256", "mallory") for _ in range(100)]
        return found, missing

    found, missing = asyncio.run(attempts())
    assert all(str(c) == str(ALICE) for c in found) and missing == [None] * 100
    assert zk.reads == ["/config/users/alice", "/config/users/mallory"]
    assert asyncio.run(cache.lookup("SCRAM-SHA-512", "alice")) is None and len(zk.reads) == 2
    zk.users["mallory"] = zk.users["alice"]
    cache.clear()
    assert str(asyncio.run(cache.lookup("SCRAM-SHA-256", "mallory"))) == str(ALICE)


def test_a_change_during_a_read_leaves_that_read_uncached():
    zk = FakeZooKeeper()
    cache = CredentialCache(zk, FakeBridge())
    zk.during_read = cache.clear
    asyncio.run(cache.lookup("SCRAM-SHA-256", "alice"))
    zk.during_read = None
    asyncio.run(cache.lookup("SCRAM-SHA-256", "alice"))
    assert len(zk.reads) == 2
