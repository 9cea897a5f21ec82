"""ConfigurationControlManager: dynamic configs of topics and brokers as ConfigRecords (KIP-500's replacement of
/config/topics and /config/brokers), checked against the one config table (zkbroker/config.py) with the same
rules as the ZooKeeper-mode AlterConfigs (zkbroker/admin_checks.py).

A ConfigRecord sets one key of one resource (a null value deletes it); a resource is (type, name): a topic by
name, a broker by id, or "" for the cluster-wide broker default. A topic's configs go with it when a
RemoveTopicRecord is replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from zkbroker import admin_checks as checks
from zkbroker.admin_checks import ApiError
from zkbroker.config import SERVER_CONFIGS, TOPIC_CONFIGS, ConfigError, validate_dynamic_broker_config
from zkbroker.metadata.records import BROKER_RESOURCE, CONFIG, TOPIC_RESOURCE, MetadataRecord, record
from zkbroker.protocol.errors import ErrorCode

from .events import ControllerResult
from .timeline import SnapshotRegistry, TimelineDict

Resource = tuple[int, str]


def config_records(resource: Resource, old: Mapping[str, str], new: Mapping[str, str]) -> list[MetadataRecord]:
    """The ConfigRecords that turn `old` into `new`, in key order."""
    rtype, name = resource
    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            out.append(record(CONFIG, resource_type=rtype, resource_name=name, name=key, value=new.get(key)))
    return out


class ConfigurationControlManager:
    def __init__(self, registry: SnapshotRegistry) -> None:
        self.configs: TimelineDict[Resource, dict[str, str]] = TimelineDict(registry)

    def get(self, resource: Resource) -> dict[str, str]:
        return dict(self.configs.get(resource, {}))

    def topic_config(self, topic: str) -> dict[str, str]:
        return self.get((TOPIC_RESOURCE, topic))

    def unclean_election_allowed(self, topic: str, default: bool) -> bool:
        """The topic's unclean.leader.election.enable, else the controller's."""
        raw = self.configs.get((TOPIC_RESOURCE, topic), {}).get("unclean.leader.election.enable")
        return default if raw is None else bool(TOPIC_CONFIGS["unclean.leader.election.enable"].coerce(raw))

    # ---- requests -------------------------------------------------------------------------------------------

    def alter(self, resources: Any, validate_only: bool, incremental: bool,
              topic_exists: Callable[[str], bool]) -> ControllerResult:
        """IncrementalAlterConfigs (`incremental`) or AlterConfigs: one response per resource, records for those
        that pass (AlterConfigs replaces a resource's whole set)."""
        records: list[MetadataRecord] = []
        responses = []
        for resource in resources:
            rtype, rname = resource.resource_type, resource.resource_name
            try:
                key = self._resource(rtype, rname, topic_exists)
                current = self.get(key)
                if incremental:
                    known = TOPIC_CONFIGS if rtype == TOPIC_RESOURCE else SERVER_CONFIGS
                    props = checks.apply_incremental(current, resource.configs, known)
                else:
                    checks.check_no_nulls([(c.name, c.value) for c in resource.configs])
                    props = {c.name: c.value for c in resource.configs}
                self._validate(rtype, rname, props)
                if not validate_only:
                    records += config_records(key, current, props)
                result = (ErrorCode.NONE, None)
            except ApiError as e:
                result = (e.code, e.message)
            responses.append({"error_code": result[0], "error_message": result[1], "resource_type": rtype,
                              "resource_name": rname})
        return ControllerResult(records, responses)

    @staticmethod
    def _resource(rtype: int, rname: str, topic_exists: Callable[[str], bool]) -> Resource:
        if rtype == TOPIC_RESOURCE:
            checks.check_topic_name(rname)
            if not topic_exists(rname):
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{rname}' does not exist.")
        elif rtype == BROKER_RESOURCE:
            if rname:
                try:
                    int(rname)
                except ValueError:
                    raise ApiError(ErrorCode.INVALID_REQUEST,
                                   f"Broker id must be an integer, but it is: {rname}") from None
        else:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"AlterConfigs is only supported for topics and brokers, but resource type is {rtype}")
        return rtype, rname

    @staticmethod
    def _validate(rtype: int, rname: str, props: Mapping[str, str]) -> None:
        if rtype == TOPIC_RESOURCE:
            try:
                checks.check_topic_configs(props, ErrorCode.INVALID_REQUEST)
            except ApiError as e:
                if e.code == ErrorCode.INVALID_REQUEST:
                    raise ApiError(e.code, f"Invalid config value for resource topic '{rname}': {e.message}") from None
                raise
            return
        try:
            validate_dynamic_broker_config(props)
        except ConfigError as e:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Invalid config value for resource broker '{rname}': {e}") from None

    # ---- replay ---------------------------------------------------------------------------------------------

    def replay(self, rec: Any) -> None:
        key = (rec.resource_type, rec.resource_name)
        props = dict(self.configs.get(key, {}))
        if rec.value is None:
            props.pop(rec.name, None)
        else:
            props[rec.name] = rec.value
        if props:
            self.configs[key] = props
        else:
            self.configs.pop(key)

    def remove_topic(self, topic: str) -> None:
        self.configs.pop((TOPIC_RESOURCE, topic))

    def snapshot_records(self) -> list[MetadataRecord]:
        return [rec for key in sorted(self.configs) for rec in config_records(key, {}, self.configs[key])]
