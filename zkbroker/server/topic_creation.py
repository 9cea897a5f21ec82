"""Topic auto-creation (`auto.create.topics.enable`, 0.8.2's default): a Metadata request for an unknown
topic writes its znodes with the broker's `num.partitions` and `default.replication.factor`; the client
hears LEADER_NOT_AVAILABLE and retries until the controller has elected leaders.

Where creation fails (the replication factor exceeds the live brokers, an illegal name) the topic does not
exist, and we answer UNKNOWN_TOPIC_OR_PARTITION; 0.8.2 answered an unknown error code there.
"""

from __future__ import annotations

import asyncio
import logging

from zkbroker import admin
from zkbroker.config import KafkaConfig
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.zk.client import ZkClient

log = logging.getLogger("zkbroker.server.KafkaApis")


class TopicAutoCreator:
    def __init__(self, config: KafkaConfig, zk: ZkClient) -> None:
        self.config = config
        self.zk = zk

    async def create(self, topic: str) -> int:
        if topic == admin.OFFSETS_TOPIC:
            return await self.create_offsets_topic()
        if topic == admin.TRANSACTION_STATE_TOPIC:
            return await self.create_transaction_state_topic()
        loop = asyncio.get_running_loop()
        try:
            assignment = await loop.run_in_executor(
                None, admin.create_topic, self.zk, topic, self.config["num.partitions"],
                self.config["default.replication.factor"])
        except admin.TopicExistsError:
            return ErrorCode.LEADER_NOT_AVAILABLE  # another broker created it first; leaders are on their way
        except admin.AdminError as e:
            log.warning("Could not auto-create topic %s: %s", topic, e)
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        except Exception as e:  # ZooKeeper unavailable
            log.warning("Could not auto-create topic %s: %r", topic, e)
            return ErrorCode.LEADER_NOT_AVAILABLE
        log.info("Auto creation of topic %s with %d partitions and replication factor %d is successful!",
                 topic, len(assignment), self.config["default.replication.factor"])
        return ErrorCode.LEADER_NOT_AVAILABLE

    async def create_offsets_topic(self) -> int:
        """`__consumer_offsets` on first use (a FindCoordinator, or Metadata asking for it), as Kafka does:
        offsets.topic.num.partitions partitions, offsets.topic.replication.factor replicas capped to the live
        brokers, compacted, with offsets.topic.segment.bytes segments. The controller elects its leaders; until
        then the coordinator is not available, which clients retry."""
        config = {"cleanup.policy": "compact", "segment.bytes": str(self.config["offsets.topic.segment.bytes"])}
        return await self._create_internal(admin.OFFSETS_TOPIC, self.config["offsets.topic.num.partitions"],
                                           self.config["offsets.topic.replication.factor"], config, None)

    async def create_transaction_state_topic(self) -> int:
        """`__transaction_state` on first use (FindCoordinator for a transactional id), the same way
        (DESIGN §18): transaction.state.log.num.partitions partitions, transaction.state.log.replication.factor
        replicas capped to the live brokers, min.insync.replicas transaction.state.log.min.isr capped to that
        factor (our deviation, so that one- and two-broker labs work; Kafka refuses instead), compacted,
        unclean leader election off."""
        config = {"cleanup.policy": "compact", "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
                  "unclean.leader.election.enable": "false"}
        return await self._create_internal(admin.TRANSACTION_STATE_TOPIC,
                                           self.config["transaction.state.log.num.partitions"],
                                           self.config["transaction.state.log.replication.factor"], config,
                                           self.config["transaction.state.log.min.isr"])

    async def _create_internal(self, topic: str, partitions: int, wanted_replication: int, config: dict[str, str],
                               min_isr: int | None) -> int:
        loop = asyncio.get_running_loop()

        def create() -> int:
            live = admin.live_broker_ids(self.zk)
            replication = max(1, min(wanted_replication, len(live)))
            topic_config = dict(config)
            if min_isr is not None:
                topic_config["min.insync.replicas"] = str(min(min_isr, replication))
            admin.create_topic(self.zk, topic, partitions, replication, topic_config)
            return replication

        try:
            replication = await loop.run_in_executor(None, create)
        except admin.TopicExistsError:
            return ErrorCode.LEADER_NOT_AVAILABLE
        except Exception as e:  # no live broker yet, or ZooKeeper unavailable: the client asks again
            log.warning("Could not create the internal topic %s: %r", topic, e)
            return ErrorCode.LEADER_NOT_AVAILABLE
        log.info("Created the internal topic %s with %d partitions and replication factor %d", topic, partitions,
                 replication)
        return ErrorCode.LEADER_NOT_AVAILABLE


class ControllerTopicCreator(TopicAutoCreator):
    """KRaft mode: topics are created by the quorum controller only (DESIGN §17), so auto-creation and the
    internal topics (`__consumer_offsets`, `__transaction_state`) are a CreateTopics sent to the active
    controller, with the same sizes and configs as ZooKeeper mode's; the replication factor of an internal topic
    is capped to the live (unfenced) brokers the metadata image names."""

    def __init__(self, config: KafkaConfig, channel, live_brokers) -> None:
        super().__init__(config, None)
        self.channel = channel
        self.live_brokers = live_brokers  # () -> the number of unfenced brokers

    async def create(self, topic: str) -> int:
        if topic in (admin.OFFSETS_TOPIC, admin.TRANSACTION_STATE_TOPIC):
            return await super().create(topic)
        return await self._create(topic, self.config["num.partitions"], self.config["default.replication.factor"],
                                  {}, auto=True)

    async def _create_internal(self, topic: str, partitions: int, wanted_replication: int, config: dict[str, str],
                               min_isr: int | None) -> int:
        replication = max(1, min(wanted_replication, self.live_brokers()))
        topic_config = dict(config)
        if min_isr is not None:
            topic_config["min.insync.replicas"] = str(min(min_isr, replication))
        return await self._create(topic, partitions, replication, topic_config, auto=False)

    async def _create(self, topic: str, partitions: int, replication: int, config: dict[str, str],
                      auto: bool) -> int:
        request = {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": replication,
                               "assignments": [], "configs": [{"name": k, "value": v} for k, v in config.items()]}],
                   "timeout_ms": 10_000, "validate_only": False}
        response = await self.channel.send(ApiKey.CREATE_TOPICS, 5, request, 15.0)
        if response is None:
            log.warning("Could not create topic %s: no active controller answered", topic)
            return ErrorCode.LEADER_NOT_AVAILABLE
        result = response.topics[0]
        if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.warning("Could not create topic %s: %s (%s)", topic, ErrorCode(result.error_code).name,
                        result.error_message)
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if auto else ErrorCode.LEADER_NOT_AVAILABLE
        if result.error_code == ErrorCode.NONE:
            log.info("Created topic %s through the controller with %d partitions and replication factor %d", topic,
                     partitions, replication)
        return ErrorCode.LEADER_NOT_AVAILABLE
