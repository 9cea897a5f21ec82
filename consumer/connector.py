"""The high-level consumer: 0.8.2's ZookeeperConsumerConnector, coordinated only through ZooKeeper.

    connector = ZookeeperConsumerConnector({"zookeeper.connect": "zk:2181/kafka", "group.id": "billing"})
    stream = connector.create_message_streams({"orders": 1})["orders"][0]
    for message in stream:                      # MessageAndMetadata(topic, partition, offset, key, value)
        handle(message)
    connector.commit_offsets()                  # or auto.commit.enable (the default, every 60 s)
    connector.shutdown()

What it does, as 0.8.2 did (reference §6):

* registers the ephemeral `/consumers/<g>/ids/<consumer id>` with its subscription;
* watches the group's members, the subscribed topics' partition lists and, for a wildcard, `/brokers/topics`
  (and `/brokers/ids` only while no broker exists); one watcher thread coalesces every trigger into one
  *rebalance* at a time;
* a rebalance attempt stops the fetchers and clears the streams, commits if auto-commit is on, deletes its
  own owner znodes, runs the assignor on its view of the group, reads the offsets of its new partitions,
  creates an ephemeral `/consumers/<g>/owners/<t>/<p>` per partition (holding the thread id), and starts the
  fetchers; if an owner znode still exists the attempt fails, its new owner znodes are deleted, and it tries
  again after `rebalance.backoff.ms`, `rebalance.max.retries` times in all, then ConsumerRebalanceFailed;
* after a session expiry it registers again and rebalances.

Beyond 0.8.2: a rebalance listener (`on_partitions_revoked` before the owner znodes are released,
`on_partitions_assigned` before fetching starts, which may return the offsets to start from -- keeping data
and offsets in one transaction of the application's own store, seed 003's exactly-once pattern); a failure of
a background rebalance is raised once from every stream (0.8.2 only logged it); and three extensions in
`config.py`, off by default.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths
from zkbroker.zk.client import SessionListener, ZkClient
from zkbroker.zk.znodes import ConsumerRegistration, TopicAssignment, ZnodeFormatError

from .assignors import ASSIGNORS, AssignmentContext, ConsumerThreadId
from .config import ConsumerConfig
from .fetcher import EARLIEST, LATEST, ConsumerFetcherManager, PartitionTopicInfo
from .offsets import ZkOffsetStore
from .stream import ChunkQueue, KafkaStream
from .subscription import Subscription, TopicFilter

__all__ = [
    "EARLIEST",
    "LATEST",
    "ConsumerRebalanceFailed",
    "RebalanceListener",
    "ZookeeperConsumerConnector",
]

log = logging.getLogger("consumer.ZookeeperConsumerConnector")

_ZK_ERRORS = (KazooException, KazooTimeoutError, ZnodeFormatError)


class ConsumerRebalanceFailed(Exception):
    """Every rebalance attempt failed (0.8.2's ConsumerRebalanceFailedException)."""


class _Superseded(Exception):
    """A rebalance attempt overtaken by a newer change of the group (rebalance.owner.wait.ms)."""


class RebalanceListener(Protocol):
    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        """Called on the rebalance thread once the fetchers are stopped and before the owner znodes of these
        partitions are released: flush and commit whatever the application holds for them."""

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> Mapping[TopicPartition, int] | None:
        """Called once this consumer owns these partitions and before it fetches them; may return where to
        start for some of them (an offset, or EARLIEST / LATEST) instead of the offsets in ZooKeeper."""


class _Session(SessionListener):
    def __init__(self, connector: ZookeeperConsumerConnector) -> None:
        self.connector = connector

    def handle_new_session(self) -> None:
        self.connector._on_new_session()

    def handle_session_expired(self) -> None:
        self.connector._on_session_expired()


def make_consumer_id(group: str, consumer_id: str | None) -> str:
    """`<group>_<host>-<ms>-<8 hex of a random UUID>`, or `<group>_<consumer.id>` (0.8.2's consumerIdString)."""
    if consumer_id:
        return f"{group}_{consumer_id}"
    return f"{group}_{socket.gethostname()}-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"


class ZookeeperConsumerConnector:
    def __init__(self, config: Mapping[str, Any] | ConsumerConfig, listener: RebalanceListener | None = None,
                 **overrides: Any) -> None:
        self.config = config if isinstance(config, ConsumerConfig) else ConsumerConfig(config, **overrides)
        for warning in self.config.warnings:
            log.warning(warning)
        c = self.config
        self.group = c.group
        self.consumer_id = make_consumer_id(self.group, c["consumer.id"])
        self.listener = listener
        self._prefix = f"[{self.consumer_id}], "
        self._assign = ASSIGNORS[c["partition.assignment.strategy"]]
        log.info("%sConnecting to zookeeper instance at %s", self._prefix, c["zookeeper.connect"])
        self.zk = ZkClient(c["zookeeper.connect"], c["zookeeper.session.timeout.ms"],
                           c["zookeeper.connection.timeout.ms"], name=self.consumer_id)
        self.zk.start()
        self.offsets = ZkOffsetStore(self.zk, self.group)
        self.fetcher = ConsumerFetcherManager(self.consumer_id, c, self.zk)

        self.subscription: Subscription | None = None
        self._streams_by_thread: dict[tuple[str, int], KafkaStream] = {}
        self._wildcard_streams: list[KafkaStream] = []
        self._registry: dict[TopicPartition, PartitionTopicInfo] = {}
        self._owners: dict[TopicPartition, str] = {}
        # Owner znodes this session may hold without knowing it: a create or delete whose answer was lost
        # with the connection. The session survives a short loss, and so would a forgotten owner znode,
        # blocking its partition for good; the next release deletes them if (and only if) they are ours.
        self._uncertain_owners: set[TopicPartition] = set()
        self._registry_session: int | None = None
        self._watched_topics: set[str] = set()
        self._watching_brokers = False

        self.rebalances = 0  # successful rebalances
        self.failed_attempts = 0  # failed rebalance attempts, in all
        self.superseded_attempts = 0  # attempts given up because the group changed meanwhile (owner wait)
        self.last_rebalance_error: ConsumerRebalanceFailed | None = None

        self._rebalance_lock = threading.RLock()
        self._commit_lock = threading.Lock()
        self._trigger = threading.Condition()
        self._triggered = False
        self._trigger_seq = 0  # counts triggers; an attempt that saw an older count has a stale view
        self._attempt_seq = 0
        self._session_renewed = False
        self._shutting_down = threading.Event()
        self._watcher: threading.Thread | None = None
        self._committer: threading.Thread | None = None
        if c["auto.commit.enable"]:
            log.info("%sstarting auto committer every %d ms", self._prefix, c["auto.commit.interval.ms"])
            self._committer = threading.Thread(target=self._auto_commit, daemon=True,
                                               name=f"{self.consumer_id}-autocommit")
            self._committer.start()

    # ---- public API ---------------------------------------------------------------------------------------

    def create_message_streams(self, topic_count_map: Mapping[str, int]) -> dict[str, list[KafkaStream]]:
        """Streams per topic: `{"t": 2}` gives two streams of t, each to be iterated by one thread."""
        if not topic_count_map or not all(isinstance(n, int) and n >= 1 for n in topic_count_map.values()):
            raise ValueError("topic_count_map must map each topic to a stream count of at least 1")
        for topic in topic_count_map:
            if not topic or "/" in topic:
                raise ValueError(f"Invalid topic name {topic!r}")
        subscription = Subscription(self.consumer_id, dict(topic_count_map))
        streams = {topic: [self._new_stream() for _ in range(count)] for topic, count in topic_count_map.items()}
        for topic, topic_streams in streams.items():
            for i, stream in enumerate(topic_streams):
                self._streams_by_thread[(topic, i)] = stream
        self._start(subscription)
        return streams

    def create_message_streams_by_filter(self, topic_filter: TopicFilter, num_streams: int = 1) -> list[KafkaStream]:
        """Streams over every topic the Whitelist / Blacklist allows, now or later created."""
        if not isinstance(topic_filter, TopicFilter) or num_streams < 1:
            raise ValueError("a Whitelist or Blacklist and at least one stream are needed")
        self._wildcard_streams = [self._new_stream() for _ in range(num_streams)]
        self._start(Subscription(self.consumer_id, {}, topic_filter, num_streams))
        return list(self._wildcard_streams)

    def commit_offsets(self) -> list[TopicPartition]:
        """Write the consumed offset of every owned partition to ZooKeeper (messages handed out count as
        consumed). With offsets.commit.owned.only, partitions this session no longer owns are skipped and
        returned (always none without it): a caller that commits before processing must not process them."""
        with self._commit_lock:
            registry = self._registry
            offsets = {tp: info.consumed_offset for tp, info in registry.items()
                       if info.consumed_offset is not None}
            if not offsets:
                return []
            if self.config["offsets.commit.owned.only"]:
                return self.offsets.commit_owned(offsets, self._owners, self._registry_session)
            self.offsets.commit(offsets)
            return []

    def owned_partitions(self) -> list[TopicPartition]:
        return sorted(self._registry)

    def shutdown(self) -> None:
        """Stop fetching, end every stream, commit (with auto-commit) and leave the group."""
        if self._shutting_down.is_set():
            return
        log.info("%sZKConsumerConnector shutting down", self._prefix)
        started = time.monotonic()
        self._shutting_down.set()
        with self._trigger:
            self._trigger.notify_all()
        with self._rebalance_lock:
            try:
                self.fetcher.stop_connections()
                for stream in self._all_streams():
                    stream.shut_down()
                if self.config["auto.commit.enable"]:
                    self.commit_offsets()
                if self._registry and self.listener is not None:
                    self._call_revoked(sorted(self._registry))
            except Exception:
                log.exception("%serror during consumer connector shutdown", self._prefix)
            finally:
                self.zk.close()
        for thread in (self._watcher, self._committer):
            if thread is not None and thread is not threading.current_thread():
                thread.join(5)
        log.info("%sZKConsumerConnector shutdown completed in %d ms", self._prefix,
                 (time.monotonic() - started) * 1000)

    close = shutdown

    def __enter__(self) -> ZookeeperConsumerConnector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ---- start: register, watch, first rebalance ----------------------------------------------------------

    def _new_stream(self) -> KafkaStream:
        return KafkaStream(ChunkQueue(self.config["queued.max.message.chunks"]), self.config["consumer.timeout.ms"],
                           self.config["client.id"])

    def _all_streams(self) -> list[KafkaStream]:
        return list(self._streams_by_thread.values()) + list(self._wildcard_streams)

    def _stream_for(self, thread: ConsumerThreadId, topic: str) -> KafkaStream:
        if self._wildcard_streams:
            return self._wildcard_streams[thread.thread_id]
        return self._streams_by_thread[(topic, thread.thread_id)]

    def _start(self, subscription: Subscription) -> None:
        if self.subscription is not None:
            raise RuntimeError("A consumer connector can create message streams at most once.")
        self.subscription = subscription
        self._register()
        self.zk.subscribe_state_changes(_Session(self))
        self.zk.subscribe_child_changes(paths.consumer_ids_path(self.group), self._on_members_changed)
        if subscription.is_wildcard:
            log.info("%sCreating topic event watcher for topics %s", self._prefix, subscription.topic_filter)
            topics = self.zk.subscribe_child_changes(paths.BROKER_TOPICS, self._on_topics_changed) or []
            self._watch_topics(subscription.topics(topics, self.config["exclude.internal.topics"]))
        else:
            self._watch_topics(subscription.topic_counts)
        self._watcher = threading.Thread(target=self._watch, daemon=True,
                                         name=f"{self.consumer_id}_watcher_executor")
        self._watcher.start()
        self._synced_rebalance()  # the first rebalance runs here, so its failure reaches the caller

    def _register(self) -> None:
        """Create our ephemeral registration; one left by our previous session is waited out (0.8.2's
        createEphemeralPathExpectConflictHandleZKBug)."""
        path = paths.consumer_id_path(self.group, self.consumer_id)
        data = self.subscription.registration().encode()
        log.info("%sbegin registering consumer %s in ZK", self._prefix, self.consumer_id)
        deadline = time.monotonic() + self.config["zookeeper.session.timeout.ms"] / 1000.0 * 2 + 5
        while True:
            try:
                self.zk.kazoo.create(path, data, ephemeral=True, makepath=True)
                break
            except NodeExistsError:
                _, stat = self.zk.get(path)
                if stat is not None and stat.ephemeralOwner == self.zk.session_id:
                    self.zk.kazoo.set(path, data)
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"consumer id {self.consumer_id} is registered by another live "
                                       "consumer") from None
                log.info("%sI wrote this conflicted ephemeral node [%s] at a previous session; waiting for it "
                         "to go away", self._prefix, path)
                time.sleep(0.2)
        log.info("%send registering consumer %s in ZK", self._prefix, self.consumer_id)

    def _watch_topics(self, topics) -> None:
        for topic in topics:
            if topic not in self._watched_topics:
                self._watched_topics.add(topic)
                self.zk.subscribe_data_changes(paths.topic_path(topic), self._on_topic_changed)

    # ---- triggers (ZkClient's event thread: they only flag the watcher thread) ------------------------------

    def _on_members_changed(self, path: str, children) -> None:
        log.info("%sbegin rebalancing: the members of group %s changed", self._prefix, self.group)
        self.rebalance_event_triggered()

    def _on_topic_changed(self, path: str, data, stat) -> None:
        if data is None:
            log.warning("%sTopic for path %s gets deleted", self._prefix, path)
        else:
            log.info("%sTopic info for path %s changed to %s, triggering rebalance", self._prefix, path,
                     data.decode(errors="replace"))
        self.rebalance_event_triggered()

    def _on_topics_changed(self, path: str, children) -> None:
        subscription = self.subscription
        allowed = subscription.topics(children or [], self.config["exclude.internal.topics"])
        added = sorted(set(allowed) - self._watched_topics)
        if added:
            log.info("%sTopic event: added topics = %s", self._prefix, added)
            self._watch_topics(added)
            self.rebalance_event_triggered()

    def _on_brokers_changed(self, path: str, children) -> None:
        if children:
            self.rebalance_event_triggered()

    def _on_new_session(self) -> None:
        log.info("%sZK expired; release old broker partition ownership; re-register consumer %s", self._prefix,
                 self.consumer_id)
        with self._trigger:
            self._session_renewed = True
            self._triggered = True
            self._trigger_seq += 1
            self._trigger.notify_all()

    def _on_session_expired(self) -> None:
        self._registry_session = None  # nothing is owned any more: owned-only commits stop at once

    def rebalance_event_triggered(self) -> None:
        with self._trigger:
            self._triggered = True
            self._trigger_seq += 1
            self._trigger.notify_all()

    def _watch(self) -> None:
        log.info("%sstarting watcher executor thread for consumer %s", self._prefix, self.consumer_id)
        while not self._shutting_down.is_set():
            with self._trigger:
                if not self._triggered:
                    self._trigger.wait(1.0)
                do_rebalance, self._triggered = self._triggered, False
            if do_rebalance and not self._shutting_down.is_set():
                try:
                    self._synced_rebalance()
                except ConsumerRebalanceFailed as e:
                    log.error("%serror during syncedRebalance: %s", self._prefix, e)
                    self.last_rebalance_error = e
                    for stream in self._all_streams():
                        stream.fail(e)
                except Exception:
                    log.exception("%serror during syncedRebalance", self._prefix)
        log.info("%sstopping watcher executor thread for consumer %s", self._prefix, self.consumer_id)

    # ---- the rebalance --------------------------------------------------------------------------------------

    def _synced_rebalance(self) -> None:
        c = self.config
        with self._rebalance_lock:
            retries = c["rebalance.max.retries"]
            for attempt in range(retries):
                if self._shutting_down.is_set():
                    return
                log.info("%sbegin rebalancing consumer %s try #%d", self._prefix, self.consumer_id, attempt)
                done = False
                self._attempt_seq = self._trigger_seq
                try:
                    self._renew_session_if_needed()
                    done = self._rebalance()
                except _Superseded:
                    # rebalance.owner.wait.ms: the group changed while we waited for an owner. Not a collision:
                    # the watcher thread starts over at once with the new view (and a fresh retry budget).
                    log.info("%sthe group changed during rebalance try #%d; starting over", self._prefix, attempt)
                    self.superseded_attempts += 1
                    self._close_fetchers()
                    return
                except _ZK_ERRORS as e:
                    # The group's znodes changed under us (or the connection dropped); another try will see
                    # the new state, and a watch has been triggered anyway.
                    log.info("%sexception during rebalance: %r", self._prefix, e)
                log.info("%send rebalancing consumer %s try #%d", self._prefix, self.consumer_id, attempt)
                if done:
                    self.rebalances += 1
                    return
                self.failed_attempts += 1
                log.info("%sRebalancing attempt failed. Clearing the cache before the next rebalancing "
                         "operation is triggered", self._prefix)
                self._close_fetchers()
                backoff = c["rebalance.backoff.ms"] + random.uniform(0, c["rebalance.backoff.jitter.ms"])
                if self._shutting_down.wait(backoff / 1000.0):
                    return
            raise ConsumerRebalanceFailed(f"{self.consumer_id} can't rebalance after {retries} retries")

    def _renew_session_if_needed(self) -> None:
        with self._trigger:
            renewed = self._session_renewed
        if renewed:
            self._registry = {}  # 0.8.2's resetState: the owner znodes went with the old session
            self._owners = {}
            self._uncertain_owners = set()
            self._register()
            with self._trigger:
                self._session_renewed = False

    def _rebalance(self) -> bool:
        kazoo = self.zk.kazoo
        own, _ = kazoo.get(paths.consumer_id_path(self.group, self.consumer_id))  # NoNodeError: not registered
        ConsumerRegistration.decode(own)
        brokers = self.zk.get_children(paths.BROKER_IDS)
        if not brokers:
            log.warning("%sno brokers found when trying to rebalance.", self._prefix)
            if not self._watching_brokers:
                self._watching_brokers = True
                self.zk.subscribe_child_changes(paths.BROKER_IDS, self._on_brokers_changed)
            return True
        self._close_fetchers()
        if self._registry and self.listener is not None:
            self._call_revoked(sorted(self._registry))
        self._release_ownership()

        ctx = self._assignment_context()
        decision = self._assign(ctx)
        for tp, thread in sorted(decision.items()):
            log.debug("%s%s attempting to claim partition %d", self._prefix, thread, tp.partition)
        # 0.8.2 reads the committed offsets before claiming. The previous owner commits before it deletes its
        # owner znode, so a claim that succeeds just after that release may start from the offset the release
        # replaced a moment later, and hand the previous owner's last messages out twice. With
        # offsets.commit.owned.only they are read once the owner znodes are ours, when that commit is certain to
        # be visible (claiming a round trip sooner, a 0.8.2 group would collide more often).
        after_claim = self.config["offsets.commit.owned.only"]
        committed = None if after_claim else self.offsets.fetch(decision)
        if self._shutting_down.is_set():
            return False
        if not self._reflect_ownership(decision):
            return False
        if committed is None:
            try:
                committed = self.offsets.fetch(decision)
            except BaseException:
                self._delete_owners(list(decision))
                raise
        session = self.zk.session_id
        starts = dict(committed)
        if self.listener is not None and decision:
            try:
                chosen = self.listener.on_partitions_assigned(sorted(decision)) or {}
            except Exception:
                log.exception("%sthe rebalance listener failed on partitions assigned", self._prefix)
                self._registry = {tp: None for tp in decision}
                self._release_ownership()
                return False
            starts.update({tp: offset for tp, offset in chosen.items() if tp in decision})
        registry = {}
        fetch_size = self.config["fetch.message.max.bytes"]
        for tp, thread in decision.items():
            offset = starts.get(tp)
            registry[tp] = PartitionTopicInfo(tp.topic, tp.partition, self._stream_for(thread, tp.topic).chunks,
                                              offset, fetch_size)
        self._owners = {tp: str(thread) for tp, thread in decision.items()}
        self._registry = registry
        self._registry_session = session
        log.info("%sConsumer %s selected partitions : %s", self._prefix, self.consumer_id,
                 ",".join(repr(registry[tp]) for tp in sorted(registry)))
        self.fetcher.start_connections(registry.values())
        return True

    def _close_fetchers(self) -> None:
        """Stop fetching and clear every stream; commit what was handed out (with auto-commit) while we still
        own the partitions, so the next owner starts after it."""
        self.fetcher.stop_connections()
        for stream in self._all_streams():
            stream.clear()
        if self.config["auto.commit.enable"] and self._registry:
            log.info("%sCommitting all offsets after clearing the fetcher queues", self._prefix)
            try:
                self.commit_offsets()
            except _ZK_ERRORS as e:
                log.warning("%sfailed to commit offsets before releasing partitions: %r", self._prefix, e)

    def _call_revoked(self, partitions: list[TopicPartition]) -> None:
        try:
            self.listener.on_partitions_revoked(partitions)
        except Exception:
            log.exception("%sthe rebalance listener failed on partitions revoked", self._prefix)

    def _release_ownership(self) -> None:
        if self._registry:
            log.info("%sReleasing partition ownership", self._prefix)
        owned, self._registry, self._owners = list(self._registry), {}, {}
        self._delete_owners(owned)
        self._delete_own_owners(sorted(self._uncertain_owners))

    def _delete_owners(self, partitions: Sequence[TopicPartition]) -> None:
        """Delete owner znodes we created. One whose delete gets no answer is remembered as uncertain, and
        the error ends the attempt (0.8.2's ZkClient retried until connected instead)."""
        kazoo = self.zk.kazoo
        pending = [(tp, kazoo.delete_async(paths.consumer_owner_path(self.group, tp.topic, tp.partition)))
                   for tp in partitions]
        self._settle_deletes(pending)

    def _delete_own_owners(self, partitions: Sequence[TopicPartition]) -> None:
        """Delete those of these owner znodes that our session holds (another consumer's are left alone)."""
        kazoo = self.zk.kazoo
        session = self.zk.session_id
        reads = [(tp, kazoo.exists_async(paths.consumer_owner_path(self.group, tp.topic, tp.partition)))
                 for tp in partitions]
        pending = []
        for tp, result in reads:
            stat = result.get()
            if stat is not None and stat.ephemeralOwner == session:
                pending.append((tp, kazoo.delete_async(paths.consumer_owner_path(self.group, tp.topic,
                                                                                 tp.partition), stat.version)))
            else:
                self._uncertain_owners.discard(tp)
        self._settle_deletes(pending)

    def _settle_deletes(self, pending: list[tuple[TopicPartition, Any]]) -> None:
        """Wait for these deletes; each answered one is certain now, each unanswered one uncertain."""
        error = None
        for tp, result in pending:
            try:
                result.get()
            except NoNodeError:
                pass
            except _ZK_ERRORS as e:
                self._uncertain_owners.add(tp)
                error = error or e
                continue
            self._uncertain_owners.discard(tp)
        if error is not None:
            raise error

    def _assignment_context(self) -> AssignmentContext:
        kazoo = self.zk.kazoo
        members = self.zk.get_children(paths.consumer_ids_path(self.group))
        reads = [(m, kazoo.get_async(paths.consumer_id_path(self.group, m))) for m in members]
        subscriptions: list[Subscription] = []
        for member, result in reads:
            try:
                data, _ = result.get()
            except NoNodeError:
                continue  # left meanwhile; its departure triggers another rebalance
            subscriptions.append(Subscription.from_registration(member, ConsumerRegistration.decode(data)))
        all_topics: list[str] = []
        if any(s.is_wildcard for s in subscriptions):
            all_topics = self.zk.get_children(paths.BROKER_TOPICS)
        exclude = self.config["exclude.internal.topics"]
        consumers_for_topic: dict[str, list[ConsumerThreadId]] = {}
        mine: dict[str, frozenset[ConsumerThreadId]] = {}
        for sub in subscriptions:
            threads = sub.thread_ids(all_topics, exclude)
            if sub.consumer_id == self.consumer_id:
                mine = threads
            for topic, ids in threads.items():
                consumers_for_topic.setdefault(topic, []).extend(ids)
        for topic in consumers_for_topic:
            consumers_for_topic[topic].sort(key=str)
        topic_reads = [(t, kazoo.get_async(paths.topic_path(t))) for t in sorted(mine)]
        partitions_for_topic: dict[str, list[int]] = {}
        for topic, result in topic_reads:
            try:
                data, _ = result.get()
                partitions_for_topic[topic] = sorted(TopicAssignment.decode(data, paths.topic_path(topic)).partitions)
            except NoNodeError:
                partitions_for_topic[topic] = []
        return AssignmentContext(self.consumer_id, mine, partitions_for_topic, consumers_for_topic)

    def _reflect_ownership(self, decision: Mapping[TopicPartition, ConsumerThreadId]) -> bool:
        """Create the owner znodes; any still owned by another consumer fails the attempt (after waiting up
        to rebalance.owner.wait.ms for it to be released), deleting the ones just created."""
        kazoo = self.zk.kazoo
        for topic in sorted({tp.topic for tp in decision}):
            kazoo.ensure_path(paths.consumer_owners_path(self.group, topic))
        created: list[TopicPartition] = []
        conflicts = self._create_owners(decision, created)
        wait_ms = self.config["rebalance.owner.wait.ms"]
        if conflicts and wait_ms > 0:
            # Wait only while our view of the group is current: once the group changed again (a trigger is
            # pending), the owner we wait for may be waiting for us, so give up and start over at once.
            deadline = time.monotonic() + wait_ms / 1000.0
            while conflicts and time.monotonic() < deadline and not self._shutting_down.is_set() \
                    and not self._superseded():
                self._wait_released(conflicts, deadline)
                conflicts = self._create_owners({tp: decision[tp] for tp in conflicts}, created)
        if conflicts and wait_ms > 0 and self._superseded() and not self._shutting_down.is_set():
            self._delete_owners(created)
            raise _Superseded()
        if conflicts:
            for tp in sorted(conflicts):
                log.info("%swaiting for the partition ownership to be deleted: %s", self._prefix, tp)
            self._delete_owners(created)
            return False
        for tp in sorted(created):
            log.debug("%s%s successfully owned partition %d for topic %s", self._prefix, decision[tp], tp.partition,
                      tp.topic)
        log.info("%sowns %d partitions", self._prefix, len(created))
        return True

    def _create_owners(self, decision: Mapping[TopicPartition, ConsumerThreadId],
                       created: list[TopicPartition]) -> list[TopicPartition]:
        kazoo = self.zk.kazoo
        session = self.zk.session_id
        # Until every answer is in, any of these may exist without our knowing it (an error below leaves them
        # uncertain, and the next release deletes those our session holds).
        self._uncertain_owners.update(decision)
        pending = [(tp, str(thread), kazoo.create_async(paths.consumer_owner_path(self.group, tp.topic,
                                                                                   tp.partition),
                                                         str(thread).encode(), ephemeral=True))
                   for tp, thread in decision.items()]
        conflicts = []
        for tp, thread, result in pending:
            try:
                result.get()
                created.append(tp)
                continue
            except NodeExistsError:
                pass
            # Ours already if a create succeeded but its answer was lost with the connection (0.8.2's
            # createEphemeralPathExpectConflict); we also check the session, which 0.8.2 could not.
            path = paths.consumer_owner_path(self.group, tp.topic, tp.partition)
            try:
                data, stat = kazoo.get(path)
            except NoNodeError:
                conflicts.append(tp)
                continue
            if stat.ephemeralOwner != session:
                conflicts.append(tp)
                continue
            if data.decode(errors="replace") != thread:
                kazoo.set(path, thread.encode(), stat.version)  # ours, left by an earlier attempt
            created.append(tp)
        self._uncertain_owners.difference_update(decision)
        return conflicts

    def _superseded(self) -> bool:
        """The group changed (a trigger came) since this rebalance attempt read it."""
        return self._trigger_seq != self._attempt_seq

    def _wait_released(self, partitions: Sequence[TopicPartition], deadline: float) -> None:
        """Block until one of these owner znodes is deleted, or the deadline."""
        released = threading.Event()
        kazoo = self.zk.kazoo
        for tp in partitions:
            if kazoo.exists(paths.consumer_owner_path(self.group, tp.topic, tp.partition),
                            watch=lambda event: released.set()) is None:
                return
        while not released.wait(0.05) and time.monotonic() < deadline and not self._superseded():
            pass

    # ---- auto-commit ----------------------------------------------------------------------------------------

    def _auto_commit(self) -> None:
        interval = self.config["auto.commit.interval.ms"] / 1000.0
        while not self._shutting_down.wait(interval):
            try:
                self.commit_offsets()
            except Exception:
                log.exception("%sexception during autoCommit", self._prefix)
