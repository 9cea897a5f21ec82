"""The controller's writes to ZooKeeper, each fenced by the controller epoch.

Every write is a ZooKeeper multi() that first checks `/controller_epoch` still has the zkVersion this
controller wrote when it took over. A controller that has been replaced (a zombie resumed after a pause)
therefore cannot change anything: its transaction fails as a whole. This goes beyond 0.8.2, which fenced
only the `state` writes, by their zkVersion; Kafka 2.1 made it the rule (KAFKA-6082).
"""

from __future__ import annotations

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from controller.election import ControllerMovedError
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient


class FencedWriter:
    def __init__(self, zk: ZkClient, epoch_zk_version: int) -> None:
        self.zk = zk
        self.epoch_zk_version = epoch_zk_version

    def _commit(self, build) -> list:
        tx = self.zk.kazoo.transaction()
        tx.check(paths.CONTROLLER_EPOCH, self.epoch_zk_version)
        build(tx)
        results = tx.commit()
        if isinstance(results[0], Exception):
            raise ControllerMovedError(
                "Controller epoch changed under this controller (another controller took over); "
                "it must not write") from results[0]
        return results[1:]

    def create(self, path: str, data: bytes) -> int:
        """Create a persistent node (parents must exist); returns its zkVersion (0). NodeExistsError if present."""
        (result,) = self._commit(lambda tx: tx.create(path, data))
        if isinstance(result, NodeExistsError):
            raise result
        if isinstance(result, Exception):
            raise result
        return 0

    def set(self, path: str, data: bytes, expected_version: int) -> int | None:
        """Set a node if its zkVersion is still `expected_version`; the new zkVersion, or None on a mismatch."""
        (result,) = self._commit(lambda tx: tx.set_data(path, data, expected_version))
        if isinstance(result, (BadVersionError, NoNodeError)):
            return None
        if isinstance(result, Exception):
            raise result
        return result.version

    def delete(self, path: str) -> None:
        (result,) = self._commit(lambda tx: tx.delete(path))
        if isinstance(result, Exception) and not isinstance(result, NoNodeError):
            raise result
