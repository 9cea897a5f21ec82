"""Consumer offsets in ZooKeeper: `/consumers/<group>/offsets/<topic>/<partition>` holds the next offset to
consume as a decimal string (0.8.2's default offsets.storage=zookeeper).

As in 0.8.2, a commit is an unconditional set per partition, skipped when the offset has not changed since
the last commit or read, and reads and writes are pipelined. `commit_owned` is the
`offsets.commit.owned.only` extension: a partition's offset is written only if its owner znode belongs to this
consumer's live session, checked in the same ZooKeeper transaction as the write.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import ZnodeFormatError, decode_offset, encode_offset

__all__ = ["ZkOffsetStore"]

log = logging.getLogger("consumer.ZkOffsetStore")


class ZkOffsetStore:
    def __init__(self, zk: ZkClient, group: str) -> None:
        self.zk = zk
        self.group = group
        self._checkpointed: dict[TopicPartition, int] = {}
        self._lock = threading.Lock()

    def path(self, tp: TopicPartition) -> str:
        return paths.consumer_offset_path(self.group, tp.topic, tp.partition)

    def fetch(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The committed offset of each partition, None where the group has none."""
        kazoo = self.zk.kazoo
        pending = [(tp, kazoo.get_async(self.path(tp))) for tp in partitions]
        out: dict[TopicPartition, int | None] = {}
        for tp, result in pending:
            try:
                data, _ = result.get()
                out[tp] = decode_offset(data)
            except NoNodeError:
                out[tp] = None
            except ZnodeFormatError as e:
                log.warning("Ignoring the offset of %s for group %s: %s", tp, self.group, e)
                out[tp] = None
        with self._lock:
            for tp, offset in out.items():
                if offset is not None:
                    self._checkpointed[tp] = offset
        return out

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Write each changed offset (0.8.2's commitOffsetToZooKeeper), creating missing nodes."""
        with self._lock:
            changed = {tp: o for tp, o in offsets.items() if self._checkpointed.get(tp) != o}
        if not changed:
            return
        # 0.8.2's ZkClient retries a write through a lost connection until it is back (retryUntilConnected): a
        # connection dropped for a moment on a loaded machine must not fail the commit. Writing the same offsets
        # again is harmless; kazoo's command retry gives up after its tries, as a session that has expired must.
        self.zk.kazoo.retry(self._write, changed)

    def _write(self, changed: Mapping[TopicPartition, int]) -> None:
        kazoo = self.zk.kazoo
        pending = [(tp, o, kazoo.set_async(self.path(tp), encode_offset(o))) for tp, o in changed.items()]
        missing = []
        for tp, offset, result in pending:
            try:
                result.get()
            except NoNodeError:
                missing.append((tp, offset))
                continue
            with self._lock:
                self._checkpointed[tp] = offset
        for tp, offset in missing:
            try:
                kazoo.create(self.path(tp), encode_offset(offset), makepath=True)
            except NodeExistsError:
                kazoo.set(self.path(tp), encode_offset(offset))
            with self._lock:
                self._checkpointed[tp] = offset

    def commit_owned(self, offsets: Mapping[TopicPartition, int], owners: Mapping[TopicPartition, str],
                     session_id: int | None) -> list[TopicPartition]:
        """Commit only partitions whose owner znode holds our thread id and belongs to `session_id`; each write
        is a transaction with a version check of that owner znode. Returns the partitions not committed."""
        with self._lock:
            changed = {tp: o for tp, o in offsets.items() if self._checkpointed.get(tp) != o}
        if not changed:
            return []
        kazoo = self.zk.kazoo
        skipped: list[TopicPartition] = []
        owner_reads = [(tp, kazoo.get_async(paths.consumer_owner_path(self.group, tp.topic, tp.partition)))
                       for tp in changed]
        owned = {}
        for tp, result in owner_reads:
            try:
                data, stat = result.get()
            except NoNodeError:
                skipped.append(tp)
                continue
            if session_id is None or stat.ephemeralOwner != session_id or data.decode() != owners.get(tp):
                skipped.append(tp)
                continue
            owned[tp] = stat.version
        exists = {tp: kazoo.exists_async(self.path(tp)) for tp in owned}
        pending = []
        for tp, version in owned.items():
            transaction = kazoo.transaction()
            transaction.check(paths.consumer_owner_path(self.group, tp.topic, tp.partition), version)
            if exists[tp].get() is None:
                kazoo.ensure_path(paths.consumer_offsets_path(self.group, tp.topic))
                transaction.create(self.path(tp), encode_offset(changed[tp]))
            else:
                transaction.set_data(self.path(tp), encode_offset(changed[tp]))
            pending.append((tp, transaction.commit_async()))
        for tp, result in pending:
            try:
                outcome = result.get()
            except KazooException:
                skipped.append(tp)
                continue
            if any(isinstance(r, Exception) for r in outcome):
                skipped.append(tp)
                continue
            with self._lock:
                self._checkpointed[tp] = changed[tp]
        if skipped:
            log.info("Did not commit the offsets of %s for group %s: no longer owned by this consumer",
                     ",".join(map(str, sorted(skipped))), self.group)
        return skipped

    def remember(self, tp: TopicPartition, offset: int) -> None:
        """An offset known to be committed (read at rebalance), so an unchanged commit is skipped."""
        with self._lock:
            self._checkpointed[tp] = offset
