"""What a consumer subscribes to (0.8.2's TopicCount and TopicFilter) and how it is registered.

A *static* subscription names topics and a stream count for each: `{"orders": 2}`. A *wildcard* one is a
Whitelist or Blacklist regex and one stream count for every matching topic; each consumer expands it
itself from /brokers/topics. The registration znode `/consumers/<g>/ids/<consumer id>` holds
`{"version":1,"subscription":{...},"pattern":"static"|"white_list"|"black_list","timestamp":"..."}`, where a
wildcard subscription's only key is the regex.

Regexes as 0.8.2's TopicFilter: commas mean "or", spaces are dropped, quotes around the whole are stripped,
and a topic must match the whole regex. Java's regex dialect and Python's agree on the usual topic patterns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from zkbroker.zk.znodes import ConsumerRegistration

from .assignors import ConsumerThreadId

__all__ = ["INTERNAL_TOPICS", "Blacklist", "Subscription", "TopicFilter", "Whitelist"]

INTERNAL_TOPICS = frozenset({"__consumer_offsets"})


class TopicFilter:
    """A topic regex (abstract: use Whitelist or Blacklist)."""

    pattern_name = ""

    def __init__(self, raw_regex: str) -> None:
        regex = raw_regex.strip().replace(",", "|").replace(" ", "")
        regex = re.sub(r"""^["']+""", "", regex)
        regex = re.sub(r"""["']+$""", "", regex)
        try:
            self._compiled = re.compile(regex)
        except re.error:
            raise ValueError(f"{regex} is an invalid regex.") from None
        self.regex = regex

    def __str__(self) -> str:
        return self.regex

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.regex == self.regex

    def __hash__(self) -> int:
        return hash((type(self), self.regex))

    def matches(self, topic: str) -> bool:
        return self._compiled.fullmatch(topic) is not None

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        raise NotImplementedError


class Whitelist(TopicFilter):
    pattern_name = "white_list"

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        return self.matches(topic) and not (exclude_internal_topics and topic in INTERNAL_TOPICS)


class Blacklist(TopicFilter):
    pattern_name = "black_list"

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        return not self.matches(topic) and not (exclude_internal_topics and topic in INTERNAL_TOPICS)


@dataclass(frozen=True)
class Subscription:
    """A consumer's subscription: static topic counts, or a filter and a stream count."""

    consumer_id: str
    topic_counts: Mapping[str, int] = field(default_factory=dict)
    topic_filter: TopicFilter | None = None
    num_streams: int = 1

    @classmethod
    def from_registration(cls, consumer_id: str, reg: ConsumerRegistration) -> Subscription:
        if reg.pattern == "static" or not reg.subscription:
            return cls(consumer_id, dict(reg.subscription))
        regex, streams = next(iter(reg.subscription.items()))
        flt = Whitelist(regex) if reg.pattern == "white_list" else Blacklist(regex)
        return cls(consumer_id, {}, flt, streams)

    @property
    def is_wildcard(self) -> bool:
        return self.topic_filter is not None

    def registration(self) -> ConsumerRegistration:
        if self.topic_filter is None:
            return ConsumerRegistration(dict(self.topic_counts), "static")
        return ConsumerRegistration({self.topic_filter.regex: self.num_streams}, self.topic_filter.pattern_name)

    def topics(self, all_topics: Iterable[str], exclude_internal_topics: bool = True) -> dict[str, int]:
        """Topic -> stream count, a wildcard expanded over the cluster's topics."""
        if self.topic_filter is None:
            return dict(self.topic_counts)
        return {t: self.num_streams for t in sorted(all_topics)
                if self.topic_filter.is_topic_allowed(t, exclude_internal_topics)}

    def thread_ids(self, all_topics: Iterable[str], exclude_internal_topics: bool = True
                   ) -> dict[str, frozenset[ConsumerThreadId]]:
        """Topic -> this consumer's threads for it (0.8.2's getConsumerThreadIdsPerTopic)."""
        return {topic: frozenset(ConsumerThreadId(self.consumer_id, i) for i in range(count))
                for topic, count in self.topics(all_topics, exclude_internal_topics).items()}
