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
