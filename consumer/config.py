"""The consumer's configuration: 0.8.2's ConsumerConfig, key for key, plus documented extensions.

The 0.8.2 keys keep their 0.8.2 defaults, so a group behaves as a 0.8.2 group did. The extensions are off by
default and each fixes a known problem of 0.8's ZooKeeper consumer:

* ``offsets.commit.owned.only`` -- commit a partition's offset only while this consumer's session still owns
  it in ZooKeeper (0.8.2 committed whatever it held, so a consumer back from a long pause could rewind a
  partition another consumer had moved on, causing duplicates), and read a new owner's starting offsets only
  once its claim succeeded (0.8.2 read them before claiming and could miss the previous owner's last commit);
* ``rebalance.backoff.jitter.ms`` -- add a random 0..jitter ms to each rebalance backoff, so consumers that
  collided do not collide again in lock step (the herd effect);
* ``rebalance.owner.wait.ms`` -- when a partition's owner znode still exists, wait up to this long for its
  owner to release it instead of failing the whole attempt at once (0.8.2) and sleeping
  ``rebalance.backoff.ms``; every consumer releases before it claims, so the wait is usually milliseconds.

And one key from Kafka 0.11's consumer, for transactions (KIP-98): ``isolation.level`` -- ``read_uncommitted``
(the default, as Kafka's) or ``read_committed``: fetch up to the last stable offset and leave out the records of
aborted transactions (consumer/read_committed.py); ``auto.offset.reset=largest`` then starts at the last stable
offset.

And the client properties of a secured listener (Kafka's `security.protocol`, `sasl.*`, `ssl.*`, read by
zkbroker/client/security.py): the fetchers reach the brokers' registered listener with TLS and SASL.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from zkbroker.client.config import ClientConfig
from zkbroker.client.security import CLIENT_SECURITY_CONFIGS, ClientSecurity
from zkbroker.config import REQUIRED, ConfigKey, ConfigType, OneOf, Range

__all__ = ["CONSUMER_CONFIGS", "ConsumerConfig"]

_INT, _BOOLEAN, _STRING = ConfigType.INT, ConfigType.BOOLEAN, ConfigType.STRING
_AT_LEAST_0, _AT_LEAST_1 = Range(0), Range(1)
_ACCEPTED = "(accepted for compatibility; offsets live in ZooKeeper)"

CONSUMER_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType({key.name: key for key in (*CLIENT_SECURITY_CONFIGS,
    ConfigKey("group.id", _STRING, REQUIRED, "The consumer group: consumers sharing it divide the partitions."),
    ConfigKey("zookeeper.connect", _STRING, REQUIRED, "ZooKeeper connection string host:port[,host:port...][/chroot]."),
    ConfigKey("zookeeper.session.timeout.ms", _INT, 6000,
              "ZooKeeper session timeout: a consumer silent this long is taken for dead and the group "
              "rebalances.", _AT_LEAST_1),
    ConfigKey("zookeeper.connection.timeout.ms", _INT, 6000, "How long to wait for a ZooKeeper connection.",
              _AT_LEAST_1),
    ConfigKey("zookeeper.sync.time.ms", _INT, 2000, "How far a ZooKeeper follower may lag behind its leader; "
              "the default of rebalance.backoff.ms.", _AT_LEAST_0),
    ConfigKey("consumer.id", _STRING, None, "Fixes the consumer id (<group>_<consumer.id>); generated when unset "
              "as <group>_<host>-<ms>-<8 hex>."),
    ConfigKey("socket.timeout.ms", _INT, 30000, "Socket timeout of fetch requests; at least fetch.wait.max.ms.",
              _AT_LEAST_1),
    ConfigKey("socket.receive.buffer.bytes", _INT, 64 * 1024, "SO_RCVBUF of fetch sockets.", _AT_LEAST_0),
    ConfigKey("fetch.message.max.bytes", _INT, 1024 * 1024,
              "Bytes fetched per partition per request; a larger message cannot be consumed.", _AT_LEAST_1),
    ConfigKey("num.consumer.fetchers", _INT, 1, "Fetcher threads per broker.", _AT_LEAST_1),
    ConfigKey("auto.commit.enable", _BOOLEAN, True,
              "Commit the offsets of messages handed out every auto.commit.interval.ms (and at rebalance and "
              "shutdown)."),
    ConfigKey("auto.commit.interval.ms", _INT, 60000, "How often offsets are committed automatically.",
              _AT_LEAST_1),
    ConfigKey("queued.max.message.chunks", _INT, 2, "Fetched chunks buffered per stream before fetching waits.",
              _AT_LEAST_1),
    ConfigKey("rebalance.max.retries", _INT, 4, "Rebalance attempts before ConsumerRebalanceFailed.",
              _AT_LEAST_1),
    ConfigKey("fetch.min.bytes", _INT, 1, "Bytes a fetch waits for at the broker.", _AT_LEAST_0),
    ConfigKey("fetch.wait.max.ms", _INT, 100, "Longest a fetch waits at the broker for fetch.min.bytes.",
              _AT_LEAST_0),
    ConfigKey("isolation.level", _STRING, "read_uncommitted", "Kafka 0.11's: read_committed reads only what "
              "committed transactions (and plain producers) wrote, up to the last stable offset; read_uncommitted "
              "everything up to the high watermark.", OneOf(("read_uncommitted", "read_committed"))),
    ConfigKey("rebalance.backoff.ms", _INT, None, "Pause between rebalance attempts; defaults to "
              "zookeeper.sync.time.ms.", _AT_LEAST_0, fallback="zookeeper.sync.time.ms"),
    ConfigKey("refresh.leader.backoff.ms", _INT, 200, "Pause before looking again for a partition's leader.",
              _AT_LEAST_0),
    ConfigKey("auto.offset.reset", _STRING, "largest", "Where to start without a committed offset, or when the "
              "offset is out of range: smallest or largest.", OneOf(("smallest", "largest"))),
    ConfigKey("consumer.timeout.ms", _INT, -1, "A stream raises ConsumerTimeout after this long without a "
              "message; -1 waits forever.", Range(-1)),
    ConfigKey("client.id", _STRING, None, "A name the brokers log with each request; defaults to group.id.",
              fallback="group.id"),
    ConfigKey("exclude.internal.topics", _BOOLEAN, True, "Keep internal topics (__consumer_offsets) out of "
              "wildcard subscriptions."),
    ConfigKey("partition.assignment.strategy", _STRING, "range", "range or roundrobin.",
              OneOf(("range", "roundrobin"))),
    ConfigKey("offsets.storage", _STRING, "zookeeper", "Where offsets are kept; zookeeper (kafka is 0.8.2's "
              "broker-side store, which zkbroker keeps in ZooKeeper too, and is refused here).",
              OneOf(("zookeeper",))),
    ConfigKey("dual.commit.enabled", _BOOLEAN, False, "Commit to both stores " + _ACCEPTED + "."),
    ConfigKey("offsets.channel.backoff.ms", _INT, 1000, "Offset manager reconnect backoff " + _ACCEPTED + "."),
    ConfigKey("offsets.channel.socket.timeout.ms", _INT, 10000,
              "Offset manager socket timeout " + _ACCEPTED + "."),
    ConfigKey("offsets.commit.max.retries", _INT, 5, "Offset commit retries at shutdown " + _ACCEPTED + "."),
    # Extensions (see the module docstring), off by default.
    ConfigKey("offsets.commit.owned.only", _BOOLEAN, False,
              "Extension: commit a partition's offset only while this consumer's ZooKeeper session owns it, "
              "and read a claimed partition's offset only after the claim."),
    ConfigKey("rebalance.backoff.jitter.ms", _INT, 0,
              "Extension: a random 0..N ms added to each rebalance backoff, against the herd effect.", _AT_LEAST_0),
    ConfigKey("rebalance.owner.wait.ms", _INT, 0,
              "Extension: wait up to N ms for a partition's previous owner to release it before failing the "
              "rebalance attempt; 0 fails at once, as 0.8.2.", _AT_LEAST_0),
)})


class ConsumerConfig(ClientConfig):
    TABLE = CONSUMER_CONFIGS

    def check(self) -> None:
        for name in ("group.id", "zookeeper.connect"):
            if not self[name].strip():
                raise self.invalid(name, "must not be empty")
        if any(c not in _LEGAL for c in self["group.id"]):
            raise self.invalid("group.id", "only ASCII letters, digits, '.', '_' and '-' are legal")
        if self["fetch.wait.max.ms"] > self["socket.timeout.ms"]:
            raise self.invalid("fetch.wait.max.ms", "socket.timeout.ms should always be at least "
                               "fetch.wait.max.ms to prevent unnecessary socket timeouts")
        self.security  # noqa: B018 -- a secured listener's settings are checked here, before ZooKeeper is reached

    @property
    def group(self) -> str:
        return self["group.id"]

    @property
    def security(self) -> ClientSecurity | None:
        """How the fetchers reach a secured listener (security.protocol, sasl.*, ssl.*); None: PLAINTEXT."""
        return ClientSecurity.from_config(self)


_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")

