"""Metadata records as the quorum controller writes them: their api keys, the version written, a builder, and
the constants their fields take (Kafka 3.7's MetadataRecordType, PartitionRegistration's sentinels,
BrokerRegistrationFencingChange, ConfigResource.Type).

A record travels as ``(api_key, version, struct)``, the shape ``protocol.metadata_records`` decodes a frame to;
the schemas themselves live there. Versions: the newest one without log directories (JBOD, KIP-858, is not
modelled), so a record decodes the same on every node of this project.
"""

from __future__ import annotations

from typing import Any

from zkbroker.protocol.metadata_records import RECORD_SCHEMAS

REGISTER_BROKER = 0
UNREGISTER_BROKER = 1
TOPIC = 2
PARTITION = 3
CONFIG = 4
PARTITION_CHANGE = 5
FENCE_BROKER = 7
UNFENCE_BROKER = 8
REMOVE_TOPIC = 9
FEATURE_LEVEL = 12
PRODUCER_IDS = 15
BROKER_REGISTRATION_CHANGE = 17
NO_OP = 20

#: The version this project writes of each record it writes.
WRITTEN_VERSIONS = {REGISTER_BROKER: 1, UNREGISTER_BROKER: 0, TOPIC: 0, PARTITION: 0, CONFIG: 0,
                    PARTITION_CHANGE: 0, FENCE_BROKER: 0, UNFENCE_BROKER: 0, REMOVE_TOPIC: 0, FEATURE_LEVEL: 0,
                    PRODUCER_IDS: 0, BROKER_REGISTRATION_CHANGE: 1, NO_OP: 0}

#: PartitionRegistration's leader sentinels: no leader; and, in a PartitionChangeRecord, "leader unchanged".
NO_LEADER = -1
NO_LEADER_CHANGE = -2
#: LeaderRecoveryState: RECOVERED, RECOVERING (after an unclean election, until the leader says it recovered);
#: -1 in a PartitionChangeRecord: unchanged.
RECOVERED = 0
RECOVERING = 1
NO_RECOVERY_CHANGE = -1
#: BrokerRegistrationFencingChange and BrokerRegistrationInControlledShutdownChange as the change record holds
#: them: 1 fence / enter controlled shutdown, -1 unfence, 0 no change.
FENCE = 1
UNFENCE = -1
NO_CHANGE = 0
IN_CONTROLLED_SHUTDOWN = 1
#: ConfigResource.Type as ConfigRecord.resource_type holds it.
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

#: The feature that names the metadata log's format, and the level Kafka 3.7 finalizes (MetadataVersion
#: 3.7-IV4); a broker supports 1 (3.0-IV1) to it.
METADATA_VERSION = "metadata.version"
METADATA_VERSION_3_7_IV4 = 19
MIN_METADATA_VERSION = 1

MetadataRecord = tuple[int, int, Any]


def element(api_key: int, array_field: str) -> Any:
    """The struct type of one element of a record's array field (what a decoded record holds there), so records
    built here replay exactly as records read from the log."""
    schema = RECORD_SCHEMAS[(api_key, WRITTEN_VERSIONS[api_key])]
    return dict(schema.fields)[array_field].element.struct


def record(api_key: int, **fields: Any) -> MetadataRecord:
    """A record to append: ``record(TOPIC, name="t", topic_id=...)`` at the version this project writes; a
    tagged field left out takes its default."""
    version = WRITTEN_VERSIONS[api_key]
    return api_key, version, RECORD_SCHEMAS[(api_key, version)].struct(**fields)
