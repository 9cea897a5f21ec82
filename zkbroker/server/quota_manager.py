"""Client quotas (KIP-13, KIP-55, KIP-124) as Kafka 2.x's ClientQuotaManager computes them, without I/O: which
quota applies to a (user, client id), the rate each quota entity has used, and how long it must be throttled.

Which quota: the first of these that holds the quota's key, Kafka's precedence --
`/config/users/<user>/clients/<client-id>`, `/config/users/<user>/clients/<default>`, `/config/users/<user>`,
`/config/users/<default>/clients/<client-id>`, `/config/users/<default>/clients/<default>`,
`/config/users/<default>`, `/config/clients/<client-id>`, `/config/clients/<default>`. The usage is counted per
quota entity, named by the real user and client id at the level the quota was found (a `<default>` user quota
still holds each user to it separately).

How much: the rate is measured over `quota.window.num` samples of `quota.window.size.seconds` (11 of 1 s) as
Kafka's Rate does -- the bytes in the samples over the time they span, with the full windows missing from the
first (samples - 1) added -- and a rate above the bound is throttled for `(rate - bound) / bound * span`: the
time after which the same bytes would have kept the entity within its quota. A request-time quota (`request_percentage`,
KIP-124: percent of one request handler thread) is measured the same way, on the time each request held the
broker's event loop, and its throttle is capped at one window, as Kafka's ClientRequestQuotaManager caps it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT = "<default>"
PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"

# (user, client id) of a /config znode: None for "not at this level"
QuotaEntity = tuple[str | None, str | None]


def _candidates(user: str, client_id: str) -> list[tuple[QuotaEntity, QuotaEntity]]:
    """(znode entity, the usage key it gives), in Kafka's precedence."""
    return [
        ((user, client_id), (user, client_id)),
        ((user, DEFAULT), (user, client_id)),
        ((user, None), (user, None)),
        ((DEFAULT, client_id), (user, client_id)),
        ((DEFAULT, DEFAULT), (user, client_id)),
        ((DEFAULT, None), (user, None)),
        ((None, client_id), (None, client_id)),
        ((None, DEFAULT), (None, client_id)),
    ]


def find_quota(configs: Mapping[QuotaEntity, Mapping[str, str]], quota_type: str, user: str,
               client_id: str) -> tuple[QuotaEntity, float] | None:
    """The usage key and bound of the quota that applies, or None when none does."""
    for entity, key in _candidates(user, client_id):
        value = configs.get(entity, {}).get(quota_type)
        if value is not None:
            try:
                return key, float(value)
            except ValueError:
                continue  # written by hand and wrong: the next level decides (the tool refuses such values)
    return None


@dataclass
class _Sample:
    start: float
    value: float


class Rate:
    """Kafka's Rate over `samples` windows of `window_s` seconds."""

    def __init__(self, samples: int = 11, window_s: float = 1.0) -> None:
        self.samples = samples
        self.window_s = window_s
        self._samples: deque[_Sample] = deque()

    def record(self, value: float, now: float) -> None:
        if not self._samples or now - self._samples[-1].start >= self.window_s:
            self._samples.append(_Sample(now, 0.0))
            while len(self._samples) > self.samples:
                self._samples.popleft()
        self._samples[-1].value += value

    def span(self, now: float) -> float:
        """The time the samples cover, as Kafka's Rate.windowSize counts it: with fewer than (samples - 1) full
        windows elapsed, the missing full windows are added to the time elapsed (its fraction of a window kept),
        so the span never falls below (samples - 1) windows and does not step down when the oldest sample leaves."""
        while self._samples and now - self._samples[0].start >= self.samples * self.window_s:
            self._samples.popleft()
        elapsed = now - self._samples[0].start if self._samples else 0.0
        full_windows = int(elapsed // self.window_s)
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_s
        return elapsed

    def measure(self, now: float) -> float:
        span = self.span(now)
        return sum(s.value for s in self._samples) / span


class ClientQuotaManager:
    """One quota type's usage and throttling (Kafka has one each for produce, fetch and request time)."""

    def __init__(self, quota_type: str, samples: int = 11, window_s: float = 1.0,
                 max_throttle_ms: int | None = None) -> None:
        self.quota_type = quota_type
        self.samples = samples
        self.window_s = window_s
        self.max_throttle_ms = max_throttle_ms  # request-time quotas: at most one window (Kafka's cap)
        self.configs: Mapping[QuotaEntity, Mapping[str, str]] = {}
        self.active = False  # whether any entity has a quota of this type (the broker skips measuring otherwise)
        self._rates: dict[QuotaEntity, Rate] = {}
        self._bounds: dict[QuotaEntity, float] = {}
        self._throttles: dict[QuotaEntity, tuple[int, float]] = {}  # the last throttle (ms) and when

    def update(self, configs: Mapping[QuotaEntity, Mapping[str, str]]) -> None:
        """The quota znodes' configs now (replaced whole on a change)."""
        self.configs = configs
        self.active = any(self.quota_type in config for config in configs.values())

    def record(self, user: str, client_id: str, value: float, now: float) -> int:
        """Count `value` (bytes, or request time in percent of a thread) for the entity; the throttle time in
        ms that keeps it within its quota (0 when there is none, or it is within it)."""
        found = find_quota(self.configs, self.quota_type, user, client_id) if self.configs else None
        if found is None:
            return 0
        key, bound = found
        rate = self._rates.get(key)
        if rate is None:
            rate = self._rates[key] = Rate(self.samples, self.window_s)
        self._bounds[key] = bound
        rate.record(value, now)
        measured = rate.measure(now)
        if bound <= 0:
            throttle_ms = int(rate.span(now) * 1000)
        elif measured <= bound:
            return 0
        else:
            throttle_ms = int((measured - bound) / bound * rate.span(now) * 1000)
        if self.max_throttle_ms is not None:
            throttle_ms = min(throttle_ms, self.max_throttle_ms)
        self._throttles[key] = (throttle_ms, now)
        return throttle_ms

    def usage(self, now: float) -> list[dict]:
        """Each quota entity in use: its bound, the rate the broker measures now (Kafka's per-entity byte-rate or
        request-time metric, which Kafka's quota test reads) and its last throttle -- for the lab's `state`."""
        rows = []
        for (user, client_id), rate in sorted(self._rates.items(), key=lambda kv: str(kv[0])):
            throttle_ms, at = self._throttles.get((user, client_id), (0, None))
            rows.append({"quota": self.quota_type, "user": user, "client_id": client_id,
                         "bound": self._bounds[(user, client_id)], "rate": round(rate.measure(now), 3),
                         "throttle_ms": throttle_ms, "throttled_s_ago": None if at is None else round(now - at, 3)})
        return rows
