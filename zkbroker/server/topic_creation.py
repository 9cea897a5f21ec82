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
        loop = asyncio.get_running_loop()
        partitions = self.config["offsets.topic.num.partitions"]
        config = {"cleanup.policy": "compact", "segment.bytes": str(self.config["offsets.topic.segment.bytes"])}

        def create() -> int:
            live = admin.live_broker_ids(self.zk)
            replication = max(1, min(self.config["offsets.topic.replication.factor"], len(live)))
            admin.create_topic(self.zk, admin.OFFSETS_TOPIC, partitions, replication, config)
            return replication

        try:
            replication = await loop.run_in_executor(None, create)
        except admin.TopicExistsError:
            return ErrorCode.LEADER_NOT_AVAILABLE
        except Exception as e:  # no live broker yet, or ZooKeeper unavailable: the client asks again
            log.warning("Could not create the offsets topic %s: %r", admin.OFFSETS_TOPIC, e)
            return ErrorCode.LEADER_NOT_AVAILABLE
        log.info("Created the offsets topic %s with %d partitions and replication factor %d", admin.OFFSETS_TOPIC,
                 partitions, replication)
        return ErrorCode.LEADER_NOT_AVAILABLE
