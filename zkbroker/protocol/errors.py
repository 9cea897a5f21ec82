"""Kafka's error codes, one exception class per code, and the codec's own protocol errors.

Two families live here and must not be confused:

* ``BrokerResponseError`` subclasses are Kafka's numbered error codes: the value a broker puts in
  an ``error_code`` field and a client turns back into an exception with :func:`for_code`.
  Each class carries ``errno`` and the ``retriable`` / ``invalid_metadata`` flags clients act on
  (retry; refresh metadata first).
* ``ProtocolError`` says that bytes and rules disagree, and whose fault it is (as in h11):
  ``RemoteProtocolError`` -- the peer sent bytes that do not parse (the ONE exception the decoders
  raise on malformed input); ``LocalProtocolError`` -- we tried to encode something invalid.
"""

from __future__ import annotations

import enum
import re
from typing import ClassVar

__all__ = [
    "BrokerResponseError",
    "ErrorCode",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "for_code",
]


class ProtocolError(Exception):
    """Bytes and the Kafka wire rules disagree. Abstract: raise one of the two subclasses."""

    def __init__(self, message: str, error_code: int = 2) -> None:
        super().__init__(message)
        # Like h11's error_status_hint: the Kafka error code a broker should answer with when the
        # failure is confined to one partition (a corrupt message set answers CORRUPT_MESSAGE and
        # writes nothing). A frame or request that does not parse closes the connection instead.
        self.error_code = error_code


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that do not parse (or break a rule of the wire format)."""


class LocalProtocolError(ProtocolError):
    """We tried to encode something the wire format cannot carry."""


class BrokerResponseError(Exception):
    """A Kafka error code as an exception. ``errno`` is the wire value."""

    errno: int = -1
    name: str = "UNKNOWN"
    retriable: bool = False
    invalid_metadata: bool = False

    _registry: ClassVar[dict[int, type[BrokerResponseError]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            # NotLeaderForPartitionError -> NOT_LEADER_FOR_PARTITION, Kafka's constant name.
            stem = cls.__name__.removesuffix("Error")
            cls.name = re.sub(r"(?<!^)(?=[A-Z])", "_", stem).upper()
        if cls.__name__.startswith("_"):
            return  # a family of codes (_Retriable), not a code
        if cls.errno in BrokerResponseError._registry:
            raise TypeError(f"error code {cls.errno} registered twice")
        BrokerResponseError._registry[cls.errno] = cls

    def __str__(self) -> str:
        detail = super().__str__()
        return f"[Error {self.errno}] {self.name}" + (f": {detail}" if detail else "")


# The table: one line per Kafka error code. The flags follow the Java client's hierarchy
# (RetriableException, InvalidMetadataException), which kafka-python mirrors: a retriable error
# is worth a retry; an invalid-metadata one is retriable after a Metadata refresh. Names are
# Kafka's constants as of 0.8.2-0.10 (GROUP_* rather than the later COORDINATOR_*).


class _Retriable(BrokerResponseError):
    retriable = True


class _InvalidMetadata(_Retriable):
    invalid_metadata = True


# fmt: off
class UnknownError(BrokerResponseError):                     errno = -1
class NoError(BrokerResponseError):                          errno, name = 0, "NONE"
class OffsetOutOfRangeError(BrokerResponseError):            errno = 1
class CorruptMessageError(_Retriable):                       errno = 2
class UnknownTopicOrPartitionError(_InvalidMetadata):        errno = 3
class InvalidFetchSizeError(BrokerResponseError):            errno = 4
class LeaderNotAvailableError(_InvalidMetadata):             errno = 5
class NotLeaderForPartitionError(_InvalidMetadata):          errno = 6
class RequestTimedOutError(_Retriable):                      errno = 7
class BrokerNotAvailableError(BrokerResponseError):          errno = 8
class ReplicaNotAvailableError(_InvalidMetadata):            errno = 9
class MessageTooLargeError(BrokerResponseError):             errno = 10
class StaleControllerEpochError(BrokerResponseError):        errno = 11
class OffsetMetadataTooLargeError(BrokerResponseError):      errno = 12
class NetworkExceptionError(_InvalidMetadata):               errno = 13
class GroupLoadInProgressError(_Retriable):                  errno = 14
class GroupCoordinatorNotAvailableError(_Retriable):         errno = 15
class NotCoordinatorError(_Retriable):                       errno = 16
class InvalidTopicError(BrokerResponseError):                errno = 17
class RecordListTooLargeError(BrokerResponseError):          errno = 18
class NotEnoughReplicasError(_Retriable):                    errno = 19
class NotEnoughReplicasAfterAppendError(_Retriable):         errno = 20
class InvalidRequiredAcksError(BrokerResponseError):         errno = 21
class IllegalGenerationError(BrokerResponseError):           errno = 22
class InconsistentGroupProtocolError(BrokerResponseError):   errno = 23
class InvalidGroupIdError(BrokerResponseError):              errno = 24
class UnknownMemberIdError(BrokerResponseError):             errno = 25
class InvalidSessionTimeoutError(BrokerResponseError):       errno = 26
class RebalanceInProgressError(BrokerResponseError):         errno = 27
class InvalidCommitOffsetSizeError(BrokerResponseError):     errno = 28
class TopicAuthorizationFailedError(BrokerResponseError):    errno = 29
class GroupAuthorizationFailedError(BrokerResponseError):    errno = 30
class ClusterAuthorizationFailedError(BrokerResponseError):  errno = 31
class InvalidTimestampError(BrokerResponseError):            errno = 32
class UnsupportedSaslMechanismError(BrokerResponseError):    errno = 33
class IllegalSaslStateError(BrokerResponseError):            errno = 34
class UnsupportedVersionError(BrokerResponseError):          errno = 35
class TopicAlreadyExistsError(BrokerResponseError):          errno = 36
class InvalidPartitionsError(BrokerResponseError):           errno = 37
class InvalidReplicationFactorError(BrokerResponseError):    errno = 38
class InvalidReplicaAssignmentError(BrokerResponseError):    errno = 39
class InvalidConfigError(BrokerResponseError):               errno = 40
class NotControllerError(_Retriable):                        errno = 41
class InvalidRequestError(BrokerResponseError):              errno = 42
class UnsupportedForMessageFormatError(BrokerResponseError): errno = 43
class PolicyViolationError(BrokerResponseError):             errno = 44
class OutOfOrderSequenceNumberError(BrokerResponseError):    errno = 45
class DuplicateSequenceNumberError(BrokerResponseError):     errno = 46
class InvalidProducerEpochError(BrokerResponseError):        errno = 47
class InvalidTxnStateError(BrokerResponseError):             errno = 48
class InvalidProducerIdMappingError(BrokerResponseError):    errno = 49
class InvalidTransactionTimeoutError(BrokerResponseError):   errno = 50
class ConcurrentTransactionsError(_Retriable):               errno = 51
class TransactionCoordinatorFencedError(BrokerResponseError):  errno = 52
class TransactionalIdAuthorizationFailedError(BrokerResponseError):  errno = 53
class OperationNotAttemptedError(BrokerResponseError):       errno = 55
class KafkaStorageError(_InvalidMetadata):                   errno = 56
class SaslAuthenticationFailedError(BrokerResponseError):    errno = 58
class UnknownProducerIdError(BrokerResponseError):           errno = 59
class ReassignmentInProgressError(BrokerResponseError):      errno = 60
class NonEmptyGroupError(BrokerResponseError):               errno = 68
class GroupIdNotFoundError(BrokerResponseError):             errno = 69
class TopicDeletionDisabledError(BrokerResponseError):       errno = 73
class FencedLeaderEpochError(_InvalidMetadata):              errno = 74
class UnknownLeaderEpochError(_InvalidMetadata):             errno = 75
class UnsupportedCompressionTypeError(BrokerResponseError):  errno = 76
class ProducerFencedError(BrokerResponseError):              errno = 90
# The metadata quorum's (KIP-595, KIP-630), as Kafka 3.7 answers them.
class InconsistentVoterSetError(BrokerResponseError):        errno = 94
class SnapshotNotFoundError(BrokerResponseError):            errno = 98
class PositionOutOfRangeError(BrokerResponseError):          errno = 99
class UnknownTopicIdError(_InvalidMetadata):                 errno = 100
class InconsistentTopicIdError(_InvalidMetadata):            errno = 103
class InconsistentClusterIdError(BrokerResponseError):       errno = 104
class PreferredLeaderNotAvailableError(_InvalidMetadata):    errno = 80
class EligibleLeadersNotAvailableError(_InvalidMetadata):    errno = 83
class ElectionNotNeededError(_InvalidMetadata):              errno = 84
class NoReassignmentInProgressError(BrokerResponseError):    errno = 85
class GroupSubscribedToTopicError(BrokerResponseError):      errno = 86
class UnstableOffsetCommitError(_Retriable):                errno = 88
class TransactionalIdNotFoundError(BrokerResponseError):     errno = 105
class MismatchedEndpointTypeError(BrokerResponseError):      errno = 114
# The quorum controller's (KIP-497, KIP-631, KIP-841), as Kafka 3.7 answers them.
class StaleBrokerEpochError(BrokerResponseError):            errno = 77
class InvalidUpdateVersionError(BrokerResponseError):        errno = 95
class DuplicateBrokerRegistrationError(BrokerResponseError): errno = 101
class BrokerIdNotRegisteredError(BrokerResponseError):       errno = 102
class IneligibleReplicaError(BrokerResponseError):           errno = 107
class NewLeaderElectedError(BrokerResponseError):            errno = 108
class UnsupportedEndpointTypeError(BrokerResponseError):     errno = 115
# fmt: on

#: Every registered code by its Kafka constant name, for error_code fields:
#: ``ErrorCode.NOT_LEADER_FOR_PARTITION == 6``.
ErrorCode = enum.IntEnum(
    "ErrorCode",
    {cls.name: code for code, cls in sorted(BrokerResponseError._registry.items())},
)
ErrorCode.__module__ = __name__

__all__ += [cls.__name__ for cls in BrokerResponseError._registry.values()]


def for_code(errno: int) -> type[BrokerResponseError]:
    """The exception class for a wire error code; unknown codes map to ``UnknownError``."""
    return BrokerResponseError._registry.get(errno, UnknownError)
