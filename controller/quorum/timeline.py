"""State that can go back to the last committed offset (Kafka's SnapshotRegistry and TimelineHashMap, as an undo
journal).

The active controller replays the records it writes as soon as it writes them, so the next request sees them
(two CreateTopics of one name must not both pass); they commit later. If it loses the leadership first, the
records may never commit, and its state must return to what the log has committed. Every write to a timeline
container while the registry is on is journalled with the offset of the record being replayed; ``revert_to``
undoes the writes past an offset, ``commit`` forgets those at or below it. A standby replays only committed
records, so its registry stays off and costs nothing.

Values are replaced, never changed in place (frozen dataclasses, tuples), so an undo only puts the old one back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

_MISSING = object()


class SnapshotRegistry:
    def __init__(self) -> None:
        self.enabled = False
        self.offset = -1  # the offset of the record being replayed: what a write is journalled under
        self._journal: list[tuple[int, TimelineDict, Any, Any]] = []

    def note(self, container: TimelineDict, key: Any, old: Any) -> None:
        if self.enabled:
            self._journal.append((self.offset, container, key, old))

    def revert_to(self, offset: int) -> int:
        """Undo every write journalled past `offset`, newest first; returns how many."""
        undone = 0
        while self._journal and self._journal[-1][0] > offset:
            _, container, key, old = self._journal.pop()
            container._restore(key, old)
            undone += 1
        return undone

    def commit(self, offset: int) -> None:
        """Forget the writes at or below `offset`: the log has committed them."""
        journal = self._journal
        i = 0
        while i < len(journal) and journal[i][0] <= offset:
            i += 1
        del journal[:i]

    def disable(self) -> None:
        self.enabled = False
        self._journal.clear()


class TimelineDict(Generic[K, V]):
    """A dict whose writes the registry can undo."""

    __slots__ = ("_data", "_registry", "_shape")

    def __init__(self, registry: SnapshotRegistry) -> None:
        self._registry = registry
        self._data: dict[K, V] = {}
        self._shape = 0  # bumped whenever the set of keys may change: what `scan` watches

    def __setitem__(self, key: K, value: V) -> None:
        old = self._data.get(key, _MISSING)
        if old is _MISSING:
            self._shape += 1
        self._registry.note(self, key, old)
        self._data[key] = value

    def __delitem__(self, key: K) -> None:
        self._registry.note(self, key, self._data[key])
        self._shape += 1
        del self._data[key]

    def _restore(self, key: K, old: Any) -> None:
        """The registry's undo of one write (not journalled)."""
        self._shape += 1
        if old is _MISSING:
            self._data.pop(key, None)
        else:
            self._data[key] = old

    def scan(self) -> Iterator[K]:
        """The keys, visited lazily, for a walk that may span turns of the controller's queue (a broker's
        partitions, a part at a time): a million keys are not copied before the first part can start. Should
        the keys change between two steps of the walk (a key added or removed, a revert), the walk goes on over a
        copy of the keys then present, from the first: a caller that skips what it has already done (as the
        broker steps do: a broker out of a partition's ISR is not taken out twice) misses nothing."""
        data = self._data
        shape = self._shape
        keys = iter(data)
        while self._shape == shape:
            try:
                key = next(keys)
            except StopIteration:
                return
            yield key
        yield from list(data)

    def pop(self, key: K, default: Any = None) -> Any:
        if key not in self._data:
            return default
        value = self._data[key]
        del self[key]
        return value

    def clear(self) -> None:
        for key in list(self._data):
            del self[key]

    def __getitem__(self, key: K) -> V:
        return self._data[key]

    def get(self, key: K, default: Any = None) -> Any:
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def items(self):
        return self._data.items()

    def keys(self):
        return self._data.keys()

    def values(self):
        return self._data.values()


class TimelineValue(Generic[V]):
    """One value whose writes the registry can undo."""

    __slots__ = ("_cell",)

    def __init__(self, registry: SnapshotRegistry, initial: V) -> None:
        self._cell: TimelineDict[None, V] = TimelineDict(registry)
        self._cell._data[None] = initial  # the initial value is no write

    def get(self) -> V:
        return self._cell[None]

    def set(self, value: V) -> None:
        self._cell[None] = value
