"""What the record-batch versions of the client APIs (Kafka 0.11-2.1) add to their handlers in KafkaApis.

* Produce v3+ carries exactly one record batch per partition (CORRUPT_MESSAGE otherwise), zstd only from v7
  (UNSUPPORTED_COMPRESSION_TYPE); a transactional batch needs the request's transactional id
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka's authorization of it answers a null one); v2+ answers the
  append time of a LogAppendTime topic, v5+ the log start.
* Fetch: a consumer whose version cannot carry record batches (v0-v3) gets them down-converted (v0-v1 to
  magic 0, v2-v3 to magic 1), and one whose version cannot carry zstd (below v10) gets
  UNSUPPORTED_COMPRESSION_TYPE for a range holding a zstd batch. Each segment knows the highest magic it holds
  and whether it holds zstd, so a range that needs neither goes by sendfile unread, as before. Followers'
  fetches are never converted.
* KIP-320's fencing: a current_leader_epoch (Fetch v9, ListOffsets v4, OffsetsForLeaderEpoch v2) older than the
  leader's answers FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH; -1 skips the check.
* ListOffsets v1+ for a timestamp: the first message at or after it (the time index), within what the asker
  may read; -1/-1 when there is none.
* OffsetsForLeaderEpoch in both truncation modes: from the leader-epoch cache with
  replication.truncation=leader-epoch; with 0.8.2's high-watermark mode, which keeps no epoch history, the
  asked epoch ends at the log end (a consumer then sees no truncation, as with 0.8.2, and an offset truncated
  away answers OFFSET_OUT_OF_RANGE on its next fetch).
"""

from __future__ import annotations

import os
from typing import Any

from zkbroker.log.log import EARLIEST_TIME, LATEST_TIME, Log
from zkbroker.protocol.compression import CODEC_ZSTD
from zkbroker.protocol.conversion import ConversionError, down_convert, highest_magic
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.fetch_response import FileRange
from zkbroker.protocol.message_set import InvalidMessageError, entry_starts
from zkbroker.protocol.record_batch import BATCH_OVERHEAD, TRANSACTIONAL, read_header
from zkbroker.server.partition import Partition

_MAGIC_AT = 16
_BATCH_CODEC_AT = 22  # the low byte of a batch's attributes


def _batch_codecs(view: memoryview) -> list[int]:
    return [view[pos + _BATCH_CODEC_AT] & 0x07 for pos in entry_starts(view) if view[pos + _MAGIC_AT] == 2]


def produce_error(version: int, records: Any, transactional_id: str | None = None) -> tuple[int, str] | None:
    """(error code, why) for a partition's records that this Produce version may not carry, or None."""
    if records is None:
        return None
    view = memoryview(records).cast("B")
    starts = entry_starts(view)
    if version >= 3 and (len(starts) != 1 or view[starts[0] + _MAGIC_AT] != 2):
        return ErrorCode.CORRUPT_MESSAGE, f"Produce v{version} must carry exactly one record batch (magic 2)"
    if version < 7 and CODEC_ZSTD in _batch_codecs(view):
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"zstd needs Produce v7 or later, not v{version}"
    if transactional_id is None and any(
            view[pos + _MAGIC_AT] == 2 and view[pos + _BATCH_CODEC_AT] & TRANSACTIONAL for pos in starts):
        # no coordinator knows of this transaction: no marker would ever end it, and its first offset would
        # hold every read_committed consumer's LSO for good
        return (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "a transactional batch in a Produce request without a transactional id")
    return None


def producer_kinds(records: Any) -> tuple[bool, bool]:
    """(whether a partition's records hold a transactional batch, whether they hold an idempotent producer's
    batch): what a Produce request is authorized by (Kafka's hasTransactionalRecords, hasIdempotentRecords)."""
    if records is None:
        return False, False
    view = memoryview(records).cast("B")
    transactional = idempotent = False
    for pos in entry_starts(view):
        if view[pos + _MAGIC_AT] == 2 and len(view) >= pos + BATCH_OVERHEAD:
            header = read_header(view, pos)
            transactional = transactional or header.is_transactional
            idempotent = idempotent or header.producer_id >= 0
    return transactional, idempotent


def transactional_producer(records: Any) -> tuple[int, int] | None:
    """(producer id, epoch) of the first transactional data batch of a partition's records, or None."""
    if records is None:
        return None
    view = memoryview(records).cast("B")
    for pos in entry_starts(view):
        if view[pos + _MAGIC_AT] == 2 and len(view) >= pos + BATCH_OVERHEAD:
            header = read_header(view, pos)
            if header.is_transactional and not header.is_control:
                return header.producer_id, header.producer_epoch
    return None


def produce_times(partition: Partition | None, info: Any) -> dict[str, int]:
    """Produce v2+'s log_append_time (-1 unless the topic stamps LogAppendTime) and v5+'s log_start_offset."""
    if partition is None:
        return {"log_append_time": -1, "log_start_offset": -1}
    append_time = -1
    if info is not None and partition.log.config.log_append_time:
        append_time = info.max_timestamp
    return {"log_append_time": append_time, "log_start_offset": partition.log.log_start_offset}


def leader_epoch_error(partition: Partition | None, current_leader_epoch: int) -> int:
    if partition is None or current_leader_epoch < 0 or current_leader_epoch == partition.leader_epoch:
        return ErrorCode.NONE
    if current_leader_epoch < partition.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


def records_for_fetch(log: Log, records: FileRange, version: int, fetch_offset: int,
                      max_bytes: int) -> tuple[int, Any]:
    """(error code, records) for a consumer's Fetch at `version`: the range itself, its batches down-converted
    (bytes), or an error and nothing."""
    magic, zstd = log.format_of(records)
    if version >= 10 or (version >= 4 and not zstd) or (version < 4 and magic < 2):
        return ErrorCode.NONE, records
    try:
        data = memoryview(os.pread(records.file.fileno(), records.size, records.position))
    except (OSError, ValueError):  # the segment was deleted under the read (retention): nothing to send now
        return ErrorCode.NONE, None
    if version >= 4:
        if CODEC_ZSTD in _batch_codecs(data):
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, None
        return ErrorCode.NONE, records
    if highest_magic(data) < 2:
        return ErrorCode.NONE, records
    try:
        converted = down_convert(data, 0 if version < 2 else 1, fetch_offset, max_bytes)
    except ConversionError as e:
        return e.error_code, None
    except InvalidMessageError:
        return ErrorCode.CORRUPT_MESSAGE, None
    # Nothing converted: the range holds no complete batch (a fetch size below the first batch). The partial
    # bytes go as they are, so the client sees what a 0.8.2 client saw there: a message larger than its fetch.
    return ErrorCode.NONE, converted or records


def offset_by_time(partition: Partition, timestamp: int, from_follower: bool,
                   read_committed: bool = False) -> tuple[int, int, int]:
    """ListOffsets v1+: (timestamp, offset, leader epoch) -- -1 and the offset for latest and earliest, the first
    message at or after `timestamp` below what the asker may read (the HW for a consumer, the LSO for a
    read_committed one: v2+'s isolation_level), or -1s. The epoch (v4) is that of the record batch holding the
    answer -- for latest, the last one before it -- and -1 where that is a message of magic 0 or 1."""
    log = partition.log
    if timestamp in (LATEST_TIME, EARLIEST_TIME):
        offset = partition.offset_for_timestamp(timestamp, from_follower, read_committed)
        return -1, offset, log.leader_epoch_at(offset - 1 if timestamp == LATEST_TIME else offset)
    found = log.fetch_offset_by_timestamp(timestamp)
    limit = partition.fetchable_end(from_follower, read_committed)
    if found is None or found.offset >= limit:
        return -1, -1, -1
    return found.timestamp, found.offset, log.leader_epoch_at(found.offset)


def epoch_end(partition: Partition, epoch: int) -> tuple[int, int]:
    """OffsetsForLeaderEpoch: (the epoch answered for, the offset where it ends in the leader's log)."""
    if partition.epoch_cache is not None:
        return partition.epoch_cache.epoch_and_end_offset_for(epoch, partition.log_end_offset)
    return epoch, partition.log_end_offset
