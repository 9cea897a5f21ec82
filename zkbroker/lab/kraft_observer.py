"""What a scenario sees of a KRaft lab (DESIGN §17): the LabObserver's questions answered without ZooKeeper.

The metadata (each partition's leader, leader epoch, ISR and replicas, the topics) comes from the brokers' lab
`state` query: the metadata image of the committed metadata log, as the broker that has applied the most of it
holds it. That is what the active controller decided, as the brokers act on it; while no quorum serves (two of
three controllers down) it stays what was last committed, as Kafka's brokers keep serving from their last image.
"Registered" means registered and unfenced, as the active controller believes (the image leaves fenced brokers
out of its live brokers too, as Metadata does). The controller is the quorum's leader that a majority follows;
the quorum "serves" while there is one. Processes, logs and replicas are read as in ZooKeeper mode."""

from __future__ import annotations

from zkbroker.lab import kraft_lab
from zkbroker.lab.cluster import LabCluster
from zkbroker.lab.observer import LabObserver, Leadership, Unknown
from zkbroker.lab.processes import process_state


class KRaftObserver(LabObserver):
    """A scenario's view of one KRaft lab; nothing to close (every read is a control-socket query)."""

    def __init__(self, lab: LabCluster) -> None:  # no ZooKeeper session: LabObserver's own __init__ opens one
        self.lab = lab
        self.cluster = lab.load()
        self.clients = self.cluster.clients  # PLAINTEXT: a KRaft lab has no --security yet
        self.zk = None

    def close(self) -> None:
        pass

    # ---- the metadata image, from the brokers ---------------------------------------------------------------

    def image(self) -> dict:
        """The `metadata` of the running broker that has applied the highest metadata offset, a serving one
        (registered and unfenced) before any other: a fenced broker may be cut off from the quorum, its image
        stale; Unknown when no broker answers."""
        best: tuple[tuple[bool, int], dict] | None = None
        for entry in self.reload().brokers:
            if entry.pid is None or process_state(entry.pid) != "running":
                continue
            state = kraft_lab.broker_state(entry.control)
            if state is None:
                continue
            rank = (kraft_lab.broker_serving(state), state.get("metadata_offset") or -1)
            if best is None or rank > best[0]:
                best = (rank, state)
        if best is None:
            raise Unknown("no KRaft broker answers its state query")
        return {**best[1]["metadata"], "offset": best[1].get("metadata_offset")}

    def registered(self) -> set[int]:
        """The brokers registered and unfenced, as the active controller believes (while every broker is down too);
        without an active controller, as the freshest image has them."""
        rows = self.quorum_rows()
        leader = kraft_lab.majority_leader(rows)
        view = LabCluster._active_controller_view(self.cluster, leader[0]) if leader is not None else None
        if view is not None and view.get("active"):
            return {b["id"] for b in view["brokers"] if not b["fenced"]}
        return set(self.image()["live_brokers"])

    def leadership(self, topic: str, partition: int) -> Leadership | None:
        for p in self.image()["partitions"]:
            if (p["topic"], p["partition"]) == (topic, partition):
                leader = p["leader"] if p["leader"] is not None and p["leader"] >= 0 else None
                return Leadership(leader, p["leader_epoch"], tuple(p["isr"]), p["leader_epoch"])
        return None

    def assignment(self, topic: str) -> dict[int, tuple[int, ...]] | None:
        rows = {p["partition"]: tuple(p["replicas"]) for p in self.image()["partitions"] if p["topic"] == topic}
        return rows or None

    def deletion_pending(self, topic: str) -> bool:
        return False  # a KRaft controller deletes a topic in one record: nothing waits for the brokers

    def state_stats(self, topic: str):
        raise Unknown("a KRaft lab has no state znodes (their ZooKeeper transactions are ZooKeeper mode's)")

    def consumer_owners(self, group: str, topic: str) -> dict[int, str]:
        raise Unknown("a KRaft lab has no ZooKeeper consumer groups")

    # ---- the quorum ------------------------------------------------------------------------------------------

    def quorum_rows(self) -> list[dict]:
        return [kraft_lab.controller_row(entry) for entry in self.lab.load().controllers]

    def controller(self) -> int | None:
        leader = kraft_lab.majority_leader(self.quorum_rows())
        return leader[0] if leader is not None else None

    def controller_epoch(self) -> int | None:
        leader = kraft_lab.majority_leader(self.quorum_rows())
        return leader[1] if leader is not None else None

    def zookeeper_roles(self) -> dict[int, str]:
        return {}

    def zookeeper_quorum(self) -> bool:
        """In a KRaft lab: whether a majority of the controllers follows one leader (the metadata can change)."""
        return kraft_lab.majority_leader(self.quorum_rows()) is not None
