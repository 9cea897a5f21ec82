"""The controller's writes to ZooKeeper, each fenced by the controller epoch.

Every write is a ZooKeeper multi() that first checks `/controller_epoch` still has the zkVersion this
controller wrote when it took over. A controller that has been replaced (a zombie resumed after a pause)
therefore cannot change anything: its transaction fails as a whole. This goes beyond 0.8.2, which fenced
only the `state` writes, by their zkVersion, and wrote `/brokers/topics/<t>`, `/admin/*` and the deletion
removals unfenced; Kafka 2.1 made the fence the rule (KAFKA-6082).

Decisions about many partitions write in batches (`create_many`, `set_many`; unless
`controller.zookeeper.batched` is false, which writes one node per transaction, one at a time, as 0.8.2's
synchronous ZooKeeper client did until Kafka 1.1's KAFKA-5642): multi() transactions of
about BATCH_OPS operations, each still opening with the fence, all in flight at once (a multi() of 500
`state` writes costs ZooKeeper little more than one write; one at a time, each is a round trip and a log
sync). A multi() is all or nothing, so one stale zkVersion would undo its whole batch: the failing
operation is reported for its node alone and the rest of the batch is committed again without it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)

from controller.election import ControllerMovedError
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient

# Operations per multi(): 500 `state` writes are ~75 KB, far below ZooKeeper's 1 MB request limit.
BATCH_OPS = 500


class FencedWriter:
    def __init__(self, zk: ZkClient, epoch_zk_version: int, batched: bool = True) -> None:
        self.zk = zk
        self.epoch_zk_version = epoch_zk_version
        # Without batching (controller.zookeeper.batched=false) each node's write is a transaction of its own,
        # waited for before the next is sent: 0.8.2's one synchronous ZooKeeper round trip per partition.
        self.batch_ops = BATCH_OPS if batched else 1
        self.batched = batched
        self.writes = 0  # znode writes committed so far (for the controller's timing lines)

    def _commit(self, build) -> list:
        results = self._checked(self._commit_async(build).get())
        if not any(isinstance(r, Exception) for r in results):
            self.writes += len(results)
        return results

    def _commit_async(self, build):
        tx = self.zk.kazoo.transaction()
        tx.check(paths.CONTROLLER_EPOCH, self.epoch_zk_version)
        build(tx)
        return tx.commit_async()

    @staticmethod
    def _checked(results: list) -> list:
        """The results after the fence's. A failed multi() reports the operations before the failing one as
        rolled back: only an error of the check itself means the epoch moved."""
        if isinstance(results[0], Exception) and not _rolled_back(results[0]):
            raise ControllerMovedError(
                "Controller epoch changed under this controller (another controller took over); "
                "it must not write") from results[0]
        return results[1:]

    def create(self, path: str, data: bytes, parents: Iterable[str] = ()) -> int:
        """Create a persistent node, after the given missing parents (created empty, in the same transaction);
        returns its zkVersion (0). NodeExistsError if it is there already."""
        parents = list(parents)

        def build(tx) -> None:
            for parent in parents:
                tx.create(parent, b"")
            tx.create(path, data)
        results = self._commit(build)
        for result in results:
            if isinstance(result, Exception) and not _rolled_back(result):
                raise result
        return 0

    def set(self, path: str, data: bytes, expected_version: int) -> int | None:
        """Set a node if its zkVersion is still `expected_version` (-1: any); the new zkVersion, or None on a
        mismatch or when the node is gone."""
        (result,) = self._commit(lambda tx: tx.set_data(path, data, expected_version))
        if isinstance(result, (BadVersionError, NoNodeError)):
            return None
        if isinstance(result, Exception):
            raise result
        return result.version

    def upsert(self, path: str, data: bytes) -> None:
        """Set a node whatever its version, creating it when missing (its parent must exist)."""
        if self.set(path, data, -1) is None:
            try:
                self.create(path, data)
            except NodeExistsError:
                self.set(path, data, -1)

    def delete(self, path: str) -> None:
        """Delete a node (without children); a missing node is fine."""
        (result,) = self._commit(lambda tx: tx.delete(path))
        if isinstance(result, Exception) and not isinstance(result, NoNodeError):
            raise result

    def delete_recursive(self, roots: Iterable[str]) -> None:
        """Delete each root with everything under it, all in one transaction (a missing root is fine).

        The trees are read first; if one changed in between (a node appeared or vanished), read and try again.
        """
        roots = list(roots)
        for _ in range(5):
            doomed: list[str] = []
            for root in roots:
                doomed += _post_order(self.zk, root)
            if not doomed:
                return
            results = self._commit(functools.partial(_delete_all, doomed))
            failures = [r for r in results if isinstance(r, Exception) and not _rolled_back(r)]
            if not failures:
                return
            if not all(isinstance(r, (NoNodeError, NotEmptyError)) for r in failures):
                raise failures[0]
        raise RuntimeError(f"Could not delete {', '.join(roots)}: they kept changing")

    # ---- many writes at once ------------------------------------------------------------------------------

    def create_many(self, items: Sequence[tuple[str, bytes, Sequence[str]]]) -> list[Exception | None]:
        """Create many nodes, each after its missing parents (as `create`): None for each created, else the
        error of the operation that failed for it (NodeExistsError, NoNodeError)."""
        groups = [[("create", parent, b"") for parent in parents] + [("create", path, data)]
                  for path, data, parents in items]
        return [r if isinstance(r, Exception) else None for r in self._commit_groups(groups)]

    def set_many(self, items: Sequence[tuple[str, bytes, int]]) -> list[int | None]:
        """Set many nodes conditionally (as `set`): the new zkVersion of each, or None on a mismatch or when
        the node is gone."""
        results = self._commit_groups([[("set", path, data, version)] for path, data, version in items])
        out: list[int | None] = []
        for result in results:
            if isinstance(result, (BadVersionError, NoNodeError)):
                out.append(None)
            elif isinstance(result, Exception):
                raise result
            else:
                out.append(result[0].version)
        return out

    def _commit_groups(self, groups: list[list[tuple]]) -> list[list | Exception]:
        """Commit groups of operations (each group all or nothing) in fenced multi() batches of about
        BATCH_OPS operations, every batch in flight at once. A multi() fails as a whole at its first failing
        operation: that operation's group gets the error, and the other groups of the batch go again in the
        next round. Returns, per group, its operations' results or the error."""
        outcome: list[list | Exception | None] = [None] * len(groups)
        pending = list(range(len(groups)))
        while pending:
            batches: list[list[int]] = [[]]
            size = 0
            for i in pending:
                if size and size + len(groups[i]) > self.batch_ops:
                    batches.append([])
                    size = 0
                batches[-1].append(i)
                size += len(groups[i])
            if self.batched:
                in_flight = [(batch, self._commit_async(functools.partial(_build, [groups[i] for i in batch])))
                             for batch in batches]
            else:  # one at a time: each commit is sent only when the one before it has been answered
                in_flight = ((batch, _Done(self._commit_async(functools.partial(_build, [groups[i] for i in batch]))
                                           .get())) for batch in batches)
            pending = []
            for batch, result in in_flight:
                results = self._checked(result.get())
                offset = 0
                failed = None
                for i in batch:
                    ops = results[offset:offset + len(groups[i])]
                    offset += len(ops)
                    error = next((r for r in ops if isinstance(r, Exception) and not _rolled_back(r)), None)
                    if error is not None:
                        outcome[i], failed = error, i
                    else:
                        outcome[i] = ops
                if failed is not None:
                    pending += [i for i in batch if i != failed]
                else:
                    self.writes += offset
        return outcome


class _Done:
    """An answer already received, with the `get()` of one still in flight."""

    def __init__(self, results: list) -> None:
        self.results = results

    def get(self) -> list:
        return self.results


def _build(groups: list[list[tuple]], tx) -> None:
    for group in groups:
        for op in group:
            if op[0] == "create":
                tx.create(op[1], op[2])
            else:
                tx.set_data(op[1], op[2], op[3])


def _delete_all(doomed: list[str], tx) -> None:
    for path in doomed:
        tx.delete(path)


def _rolled_back(result: Exception) -> bool:
    """The operations of a failed multi() other than the failing one: undone (RolledBackError) or not tried
    (RuntimeInconsistency)."""
    return isinstance(result, (RolledBackError, RuntimeInconsistency))


def _post_order(zk: ZkClient, root: str) -> list[str]:
    """`root` and its descendants, children before parents ([] if root is missing)."""
    _, stat = zk.get(root)
    if stat is None:
        return []
    out: list[str] = []
    for child in zk.get_children(root):
        out += _post_order(zk, f"{root}/{child}")
    out.append(root)
    return out
