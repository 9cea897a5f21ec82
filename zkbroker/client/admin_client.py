"""AdminClient: our own client of the Admin API (Kafka's AdminClient, the part the `--bootstrap-server` tools and
bench/admin.py need), over the one blocking connection, BrokerConnection.

Requests Kafka sends to the controller go to the broker Metadata names as controller; a NOT_CONTROLLER answer
(the controller moved) refreshes the metadata and sends again, until `timeout_s`. The others go to any broker
(broker configs to the broker they name, as Kafka's AdminClient routes them). The versions sent are the last
non-flexible ones, which every Kafka 2.x broker and zkbroker serve. Results come back as the decoded structs;
`AdminError` carries a refused one's code and message.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from zkbroker.client.connection import BrokerConnection
from zkbroker.client.metadata import Cluster, cluster_of, parse_broker_list
from zkbroker.client.security import ClientSecurity
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode, ProtocolError

__all__ = ["AdminClient", "AdminError"]

VERSIONS = {ApiKey.METADATA: 1, ApiKey.CREATE_TOPICS: 4, ApiKey.DELETE_TOPICS: 3, ApiKey.CREATE_PARTITIONS: 1,
            ApiKey.DESCRIBE_CONFIGS: 3, ApiKey.ALTER_CONFIGS: 1, ApiKey.INCREMENTAL_ALTER_CONFIGS: 0,
            ApiKey.DELETE_RECORDS: 1, ApiKey.ELECT_LEADERS: 1, ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: 0, ApiKey.DESCRIBE_ACLS: 1, ApiKey.CREATE_ACLS: 1,
            ApiKey.DELETE_ACLS: 1, ApiKey.DESCRIBE_CLIENT_QUOTAS: 0, ApiKey.ALTER_CLIENT_QUOTAS: 0}
#: Answers after which a partition's request goes again, to the leader fresh metadata names
_RETRIABLE = (ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE)
TOPIC, BROKER = 2, 4  # ConfigResource.Type


class AdminError(Exception):
    """A broker refused a request: Kafka's error code and the message it gave (or the code's name)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        try:
            self.name = ErrorCode(code).name
        except ValueError:
            self.name = str(code)
        super().__init__(message or self.name)


class AdminClient:
    def __init__(self, bootstrap: str, client_id: str = "zkbroker-admin", timeout_s: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        self.bootstrap = parse_broker_list(bootstrap, "--bootstrap-server")
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self.cluster = Cluster()
        self.internal: set[str] = set()  # the internal topics of the last metadata (__consumer_offsets)

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- connections and metadata -----------------------------------------------------------------------------

    def _send_to(self, address: tuple[str, int], api_key: int, body: Any) -> Any:
        conn = self._connections.get(address)
        if conn is None:
            conn = self._connections[address] = BrokerConnection(*address, self.client_id, self.timeout_s,
                                                                          self.security)
        try:
            return conn.send(api_key, VERSIONS[api_key], body)
        except (OSError, ProtocolError):
            conn.close()
            del self._connections[address]
            raise

    def _any(self, api_key: int, body: Any) -> Any:
        addresses = [(b.host, b.port) for b in self.cluster.brokers.values()] + self.bootstrap
        errors = []
        for address in dict.fromkeys(addresses):
            try:
                return self._send_to(address, api_key, body)
            except (OSError, ProtocolError) as e:
                errors.append(f"{address[0]}:{address[1]} ({e})")
        raise ConnectionError("No broker answered: " + "; ".join(errors))

    def metadata(self, topics: Iterable[str] | None = None) -> Cluster:
        """Metadata v1 (None: every topic), from any broker; remembered as `cluster`."""
        response = self._any(ApiKey.METADATA, {"topics": None if topics is None else list(topics)})
        self.cluster = cluster_of(response)
        self.internal = {t.topic for t in response.topics if t.is_internal}
        return self.cluster

    def _to_controller(self, api_key: int, body: Any, results: str | None) -> Any:
        """Send to the controller; again while it answers NOT_CONTROLLER (in every row of `results`, or at the
        top when `results` is None)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            cluster = self.metadata([])
            controller = cluster.brokers.get(cluster.controller_id)
            if controller is not None:
                response = self._send_to((controller.host, controller.port), api_key, body)
                if results is None:
                    if response.error_code != ErrorCode.NOT_CONTROLLER:
                        return response
                elif not (rows := getattr(response, results)) or any(
                        r.error_code != ErrorCode.NOT_CONTROLLER for r in rows):
                    return response
            if time.monotonic() >= deadline:
                raise AdminError(ErrorCode.NOT_CONTROLLER, "No controller answered before the timeout")
            time.sleep(0.1)

    def _to_broker(self, broker_id: int, api_key: int, body: Any) -> Any:
        broker = self.metadata([]).brokers.get(broker_id)
        if broker is None:
            raise AdminError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker {broker_id} is not in the cluster")
        return self._send_to((broker.host, broker.port), api_key, body)

    # ---- topics -----------------------------------------------------------------------------------------------

    def create_topics(self, topics: list[Mapping[str, Any]], timeout_ms: int = 30000,
                      validate_only: bool = False) -> dict[str, tuple[int, str | None]]:
        """Each topic a dict: name, and num_partitions/replication_factor (-1: the broker's defaults) or
        assignments {partition: [brokers]}, and configs {name: value}. Returns {name: (code, message)}."""
        body = {"timeout_ms": timeout_ms, "validate_only": validate_only, "topics": [
            {"name": t["name"], "num_partitions": t.get("num_partitions", -1),
             "replication_factor": t.get("replication_factor", -1),
             "assignments": [{"partition_index": p, "broker_ids": list(b)}
                             for p, b in sorted(t.get("assignments", {}).items())],
             "configs": [{"name": k, "value": v} for k, v in t.get("configs", {}).items()]} for t in topics]}
        response = self._to_controller(ApiKey.CREATE_TOPICS, body, "topics")
        return {r.name: (r.error_code, r.error_message) for r in response.topics}

    def delete_topics(self, names: list[str], timeout_ms: int = 30000) -> dict[str, int]:
        response = self._to_controller(ApiKey.DELETE_TOPICS, {"topic_names": names, "timeout_ms": timeout_ms},
                                       "responses")
        return {r.name: r.error_code for r in response.responses}

    def create_partitions(self, counts: Mapping[str, int], assignments: Mapping[str, list] | None = None,
                          timeout_ms: int = 30000, validate_only: bool = False) -> dict[str, tuple[int, str | None]]:
        assignments = assignments or {}
        body = {"timeout_ms": timeout_ms, "validate_only": validate_only, "topics": [
            {"name": name, "count": count,
             "assignments": None if name not in assignments else [{"broker_ids": list(b)} for b in assignments[name]]}
            for name, count in counts.items()]}
        response = self._to_controller(ApiKey.CREATE_PARTITIONS, body, "results")
        return {r.name: (r.error_code, r.error_message) for r in response.results}

    def elect_leaders(self, election_type: int, partitions: Iterable[tuple[str, int]] | None,
                      timeout_ms: int = 30000) -> dict[tuple[str, int], tuple[int, str | None]]:
        """ElectLeaders v1 (0 preferred, 1 unclean) at the controller; None: every partition. Each partition's
        (error code, message); AdminError for a refusal of the whole request."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions or ():
            by_topic.setdefault(topic, []).append(partition)
        body = {"election_type": election_type, "timeout_ms": timeout_ms, "topic_partitions": None
                if partitions is None else [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}
        response = self._to_controller(ApiKey.ELECT_LEADERS, body, None)
        if response.error_code != ErrorCode.NONE:
            raise AdminError(response.error_code)
        return {(t.topic, p.partition_id): (p.error_code, p.error_message)
                for t in response.replica_election_results for p in t.partition_result}

    def alter_partition_reassignments(self, moves: Mapping[tuple[str, int], Iterable[int] | None],
                                      timeout_ms: int = 30000) -> dict[tuple[str, int], tuple[int, str | None]]:
        """AlterPartitionReassignments at the controller: each partition's target replicas, None to cancel."""
        by_topic: dict[str, list] = {}
        for (topic, partition), replicas in moves.items():
            by_topic.setdefault(topic, []).append({"partition_index": partition,
                                                   "replicas": None if replicas is None else list(replicas)})
        body = {"timeout_ms": timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        response = self._to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, None)
        if response.error_code != ErrorCode.NONE:
            raise AdminError(response.error_code, response.error_message)
        return {(t.name, p.partition_index): (p.error_code, p.error_message)
                for t in response.responses for p in t.partitions}

    def list_partition_reassignments(self, partitions: Iterable[tuple[str, int]] | None = None,
                                     timeout_ms: int = 30000) -> dict[tuple[str, int], tuple[tuple[int, ...], ...]]:
        """ListPartitionReassignments: (replicas, adding, removing) of each partition being reassigned."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions or ():
            by_topic.setdefault(topic, []).append(partition)
        body = {"timeout_ms": timeout_ms, "topics": None if partitions is None else [
            {"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}
        response = self._to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, body, None)
        if response.error_code != ErrorCode.NONE:
            raise AdminError(response.error_code, response.error_message)
        return {(t.name, p.partition_index): (tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in response.topics for p in t.partitions}

    # ---- records ----------------------------------------------------------------------------------------------

    def delete_records(self, offsets: Mapping[tuple[str, int], int],
                       timeout_ms: int = 30000) -> dict[tuple[str, int], tuple[int, int]]:
        """DeleteRecords, each partition sent to its leader (-1: up to the high watermark). Returns each
        partition's (low watermark, error code); a leader that moved is found again until `timeout_s`."""
        results: dict[tuple[str, int], tuple[int, int]] = {}
        todo = dict(offsets)
        deadline = time.monotonic() + self.timeout_s
        while todo:
            cluster = self.metadata(sorted({t for t, _ in todo}))
            by_leader: dict[int, dict[tuple[str, int], int]] = {}
            for tp, offset in todo.items():
                if tp[1] not in cluster.topics.get(tp[0], {}):
                    results[tp] = (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif (leader := cluster.leader_for(*tp)) is None:
                    results[tp] = (-1, ErrorCode.LEADER_NOT_AVAILABLE)
                else:
                    by_leader.setdefault(leader.node_id, {})[tp] = offset
            for broker_id, part in by_leader.items():
                by_topic: dict[str, list] = {}
                for (topic, partition), offset in part.items():
                    by_topic.setdefault(topic, []).append({"partition_index": partition, "offset": offset})
                broker = cluster.brokers[broker_id]
                response = self._send_to((broker.host, broker.port), ApiKey.DELETE_RECORDS, {
                    "timeout_ms": timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
                for t in response.topics:
                    for p in t.partitions:
                        results[(t.name, p.partition_index)] = (p.low_watermark, p.error_code)
            todo = {tp: o for tp, o in todo.items() if results[tp][1] in _RETRIABLE}
            if todo:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.1)
        return {tp: results[tp] for tp in offsets}

    # ---- configs ----------------------------------------------------------------------------------------------

    def describe_configs(self, resource_type: int, name: str, synonyms: bool = True) -> list[Any]:
        """The config entries of one topic or broker ("" = the cluster default); AdminError if refused."""
        body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
                "include_synonyms": synonyms, "include_documentation": False}
        api = ApiKey.DESCRIBE_CONFIGS
        response = self._to_broker(int(name), api, body) if resource_type == BROKER and name else self._any(api, body)
        (result,) = response.results
        if result.error_code != ErrorCode.NONE:
            raise AdminError(result.error_code, result.error_message)
        return list(result.configs)

    def alter_configs(self, resource_type: int, name: str, configs: Mapping[str, str | None],
                      incremental_ops: Mapping[str, int] | None = None, validate_only: bool = False) -> None:
        """AlterConfigs (the whole set) or, given `incremental_ops` {name: op}, IncrementalAlterConfigs."""
        if incremental_ops is None:
            api = ApiKey.ALTER_CONFIGS
            entries = [{"name": k, "value": v} for k, v in configs.items()]
        else:
            api = ApiKey.INCREMENTAL_ALTER_CONFIGS
            entries = [{"name": k, "config_operation": op, "value": configs.get(k)}
                       for k, op in incremental_ops.items()]
        body = {"validate_only": validate_only,
                "resources": [{"resource_type": resource_type, "resource_name": name, "configs": entries}]}
        response = self._to_broker(int(name), api, body) if resource_type == BROKER and name else self._any(api, body)
        (result,) = response.responses
        if result.error_code != ErrorCode.NONE:
            raise AdminError(result.error_code, result.error_message)

    # ---- ACLs (KIP-140) ----------------------------------------------------------------------------------------

    def create_acls(self, bindings: list[Mapping[str, Any]]) -> None:
        """Each binding a dict of CreateAcls v1's fields (wire codes); AdminError for the first one refused."""
        response = self._any(ApiKey.CREATE_ACLS, {"creations": list(bindings)})
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(result.error_code, result.error_message)

    def describe_acls(self, acl_filter: Mapping[str, Any]) -> list[Any]:
        """The resources (with their ACLs) matching a DescribeAcls v1 filter."""
        response = self._any(ApiKey.DESCRIBE_ACLS, dict(acl_filter))
        if response.error_code != ErrorCode.NONE:
            raise AdminError(response.error_code, response.error_message)
        return list(response.resources)

    def delete_acls(self, filters: list[Mapping[str, Any]]) -> list[Any]:
        """The ACLs each DeleteAcls v1 filter removed."""
        response = self._any(ApiKey.DELETE_ACLS, {"filters": list(filters)})
        for result in response.filter_results:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(result.error_code, result.error_message)
        return [list(r.matching_acls) for r in response.filter_results]

    # ---- client quotas (KIP-546) -------------------------------------------------------------------------------

    def describe_client_quotas(self, components: list[Mapping[str, Any]], strict: bool = False) -> list[Any]:
        response = self._any(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": list(components), "strict": strict})
        if response.error_code != ErrorCode.NONE:
            raise AdminError(response.error_code, response.error_message)
        return list(response.entries or ())

    def alter_client_quotas(self, entity: list[Mapping[str, Any]], ops: list[Mapping[str, Any]]) -> None:
        response = self._any(ApiKey.ALTER_CLIENT_QUOTAS, {"entries": [{"entity": entity, "ops": ops}],
                                                          "validate_only": False})
        for result in response.entries:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(result.error_code, result.error_message)
