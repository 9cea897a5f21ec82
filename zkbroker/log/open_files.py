"""The process's open-files limit (RLIMIT_NOFILE) against what the logs hold open.

Kafka keeps every segment's file open and tells operators to raise the limit (its docs suggest 100,000 or more);
a broker that runs out mid-load dies on "Too many open files". Here the broker raises its own soft limit to the
hard one at start, and before it opens its logs it says, naming the limit, when the logs it found need more than
it got. Each open partition holds FILES_PER_PARTITION descriptors: its active segment's file, and one for each of
its two mapped indexes (CPython's mmap keeps a duplicate of the file's descriptor for as long as the mapping
lives, where a JVM's mapping holds none; Python 3.13's `trackfd=False` would drop them).
"""

from __future__ import annotations

import errno
import logging
import resource

logger = logging.getLogger(__name__)

FILES_PER_PARTITION = 3
RESERVE = 1000  # sockets, the metadata log, checkpoints, a segment rolled or an index rebuilt meanwhile


def files_needed(partitions: int) -> int:
    """The descriptors a broker holding `partitions` logs (one segment each) needs, its connections included."""
    return partitions * FILES_PER_PARTITION + RESERVE


def shortfall(partitions: int, soft: int) -> str | None:
    """A sentence naming the limit when `partitions` logs need more descriptors than `soft` allows; else None."""
    need = files_needed(partitions)
    if soft == resource.RLIM_INFINITY or need <= soft:
        return None
    return (f"{partitions:,} partition logs need about {need:,} open files ({FILES_PER_PARTITION} a partition and "
            f"{RESERVE:,} spare) but the open-files limit (RLIMIT_NOFILE, `ulimit -n`) is {soft:,}: raise the hard "
            "limit for this process (e.g. `ulimit -Hn` as root, LimitNOFILE= in a systemd unit, nofile in "
            "/etc/security/limits.conf) or the broker will fail with \"Too many open files\"")


def raise_soft_limit() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (an unprivileged process may); log and return
    (soft, hard) as they are afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:
        logger.warning("Could not raise the open-files limit (RLIMIT_NOFILE) from %s to %s: %s", soft, hard, e)
        return soft, hard
    logger.info("Open-files limit (RLIMIT_NOFILE) raised from %s to the hard limit, %s", soft, hard)
    return hard, hard


def is_too_many_open_files(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in (errno.EMFILE, errno.ENFILE)
