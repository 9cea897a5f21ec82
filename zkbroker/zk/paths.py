"""The one table of ZooKeeper paths, exactly as Kafka 0.8.2 lays them out (kafka.utils.ZkUtils).

Every path is relative to the cluster's chroot; ZkClient applies the chroot. What each node holds is in
`znodes.py`.
"""

CONSUMERS = "/consumers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_CHANGES = "/config/changes"
CONFIG_TOPICS = "/config/topics"
# Kafka 1.1 (KIP-226): dynamic broker configs, per broker and for every broker (DEFAULT_ENTITY); not in 0.8.2.
CONFIG_BROKERS = "/config/brokers"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
# Kafka 0.11 (KIP-98): the last block of producer ids a broker took (ProducerIdManager); not in 0.8.2.
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
# Kafka 0.10.1 (KIP-78): the cluster id, created by the first broker to start; not in 0.8.2.
CLUSTER_ID = "/cluster/id"

# Created by every broker at start (ZkUtils.setupCommonPaths).
COMMON_PATHS = (CONSUMERS, BROKER_IDS, BROKER_TOPICS, CONFIG_CHANGES, CONFIG_TOPICS, DELETE_TOPICS)

CONFIG_CHANGE_PREFIX = "config_change_"
DEFAULT_ENTITY = "<default>"  # Kafka's ConfigEntityName.Default: the config of every entity of a type


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_path(broker: int | str) -> str:
    """`/config/brokers/<id>`, or `/config/brokers/<default>` with DEFAULT_ENTITY."""
    return f"{CONFIG_BROKERS}/{broker}"


def entity_configs_path(entity_type: str) -> str:
    """`/config/<type>` for any of Kafka's config entity types (topics, brokers, clients, users)."""
    return f"/config/{entity_type}"


def entity_config_path(entity_type: str, name: str) -> str:
    return f"{entity_configs_path(entity_type)}/{name}"


def config_change_path(child: str) -> str:
    return f"{CONFIG_CHANGES}/{child}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def consumer_group_path(group: str) -> str:
    return f"{CONSUMERS}/{group}"


def consumer_ids_path(group: str) -> str:
    return f"{CONSUMERS}/{group}/ids"


def consumer_id_path(group: str, consumer_id: str) -> str:
    return f"{CONSUMERS}/{group}/ids/{consumer_id}"


def consumer_owners_path(group: str, topic: str) -> str:
    return f"{CONSUMERS}/{group}/owners/{topic}"


def consumer_owner_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/owners/{topic}/{partition}"


def consumer_offsets_path(group: str, topic: str) -> str:
    return f"{CONSUMERS}/{group}/offsets/{topic}"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"


def split_chroot(connect: str) -> tuple[str, str]:
    """Split `host:port[,host:port...][/chroot]` into (hosts, chroot); chroot is "" when absent."""
    slash = connect.find("/")
    if slash < 0:
        return connect, ""
    chroot = connect[slash:].rstrip("/")
    return connect[:slash], chroot

# Kafka 2.x security (DESIGN §19). Literal ACLs live under /kafka-acl/<Type>/<name>, the other pattern types
# under /kafka-acl-extended/<pattern type in lower case>/<Type>/<name>; a change to either is announced by a
# sequential acl_changes_N under the matching change path (kafka.zk.ZkAclStore, ZkAclChangeStore).
ACL = "/kafka-acl"
ACL_EXTENDED = "/kafka-acl-extended"
ACL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
CONFIG_USERS = "/config/users"


def acl_path(pattern_type: str, resource_type: str, name: str) -> str:
    """`LITERAL` ACLs under /kafka-acl, others under /kafka-acl-extended/<pattern type in lower case>."""
    root = ACL if pattern_type == "LITERAL" else f"{ACL_EXTENDED}/{pattern_type.lower()}"
    return f"{root}/{resource_type}/{name}"


def acl_change_path(pattern_type: str) -> str:
    """The prefix of a sequential change node for an ACL of this pattern type (create it SEQUENCE)."""
    root = ACL_CHANGES if pattern_type == "LITERAL" else ACL_EXTENDED_CHANGES
    return f"{root}/{ACL_CHANGE_PREFIX}"


def user_config_path(user: str) -> str:
    """A user's SCRAM credentials and quotas (Kafka 2.x ConfigEntityZNode)."""
    return f"{CONFIG_USERS}/{user}"
