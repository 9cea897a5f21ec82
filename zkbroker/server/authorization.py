"""KafkaApis's `authorize(session, operation, resource)`: the running request's principal and host (its
connection's Session) against the ACL authorizer, when `authorizer.class.name` names one; every request is
allowed when none is configured, as in Kafka.

Handlers ask one question per resource (`topic`, `group`, `cluster`, `transactional_id`) and answer Kafka's
code for a refusal (`security.acl.AUTHORIZATION_ERROR`: 29, 30, 31, 53). Denials are logged as Kafka's
authorizer logger logs them and, in a lab, go to the timeline (`acl_denied`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from zkbroker import timeline
from zkbroker.security.acl import CLUSTER_NAME, AclAuthorizer, AclOperation, Resource, ResourceType
from zkbroker.server.network import SESSION

log = logging.getLogger("kafka.authorizer.logger")

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                                AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE)
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE)

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


class RequestAuthorizer:
    def __init__(self, authorizer: AclAuthorizer | None = None, timeline_source: str | None = None) -> None:
        self.authorizer = authorizer
        self.timeline_source = timeline_source

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        if self.authorizer is None:
            return True
        session = SESSION.get()
        if session.listener_name is None:  # not from a connection (the broker calling itself)
            return True
        resource = Resource(resource_type, name)
        ok = self.authorizer.authorize(session.principal, session.client_address, operation, resource)
        if not ok:
            log.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:%s", session.principal,
                     operation.label, session.client_address, resource_type.label, name)
            if self.timeline_source is not None:
                timeline.emit(self.timeline_source, "acl_denied", principal=session.principal,
                              operation=operation.label, resource_type=resource_type.label, resource=name,
                              host=session.client_address, listener=session.listener_name)
        return ok

    def topic(self, operation: AclOperation, name: str) -> bool:
        return self.allowed(operation, ResourceType.TOPIC, name)

    def group(self, operation: AclOperation, name: str) -> bool:
        return self.allowed(operation, ResourceType.GROUP, name)

    def cluster(self, operation: AclOperation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def transactional_id(self, operation: AclOperation, name: str) -> bool:
        return self.allowed(operation, ResourceType.TRANSACTIONAL_ID, name)

    def denied_topics(self, operation: AclOperation, names: Iterable[str]) -> set[str]:
        """The names among `names` this request may not `operation` (each asked once)."""
        if self.authorizer is None:
            return set()
        return {name for name in set(names) if not self.topic(operation, name)}
