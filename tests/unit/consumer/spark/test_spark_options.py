"""The zkkafka source's options without Spark or a cluster: option checks with Spark's messages, and the
schema."""

from __future__ import annotations

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from consumer.spark import ZkKafkaOptionError, kafka_schema, parse_options

ZK = "127.0.0.1:2181/kafka"
SCHEMA = to_arrow_schema(kafka_schema(), timezone="UTC")


def options(**extra: str) -> dict[str, str]:
    return {"zookeeper.connect": ZK, **extra}


# ---- options ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("given_options, message", [
    ({}, "One of the following options must be specified for Kafka source: subscribe, subscribepattern, assign. "
         "See the docs for more details."),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options can be specified for Kafka "
                                                 "source: subscribe, subscribepattern, assign."),
    ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe' is ' , '"),
    ({"subscribePattern": " "}, "Pattern to subscribe is empty as specified value for option 'subscribePattern'"),
    ({"subscribePattern": "a("}, "Invalid subscribePattern 'a('"),
    ({"assign": "a:0"}, "No topicpartitions to assign as specified value for option 'assign' is 'a:0'"),
    ({"assign": '{"a":0}'}, 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got {"a":0}'),
    ({"subscribe": "a", "startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'},
     "startingOffsets for a-0 can't be latest for batch queries on Kafka"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
    ({"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'},
     "ending offset for a-0 can't be earliest for batch queries on Kafka"),
    ({"subscribe": "a", "startingOffsets": "{oops"}, 'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, '
                                                      "got {oops"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":1}}', "endingOffsets": '{"a":{"1":5}}'},
     "The specified start offset and end offset should have the same topic-partitions. Topic-partitions for "
     "start offset: [a-0], topic-partitions for end offset: [a-1]."),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":9}}', "endingOffsets": '{"a":{"0":5}}'},
     "The specified start offset 9 is greater than the end offset 5 for topic a partition 0."),
    ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
    ({"subscribe": "a", "minPartitions": "many"}, "minPartitions must be positive, got 'many'"),
    ({"subscribe": "a", "maxRecordsPerPartition": "-3"}, "maxrecordsperpartition must be positive"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "Option 'failondataloss' must be true or false, got 'maybe'"),
    ({"subscribe": "a", "startingOffsets": "group"}, "startingOffsets 'group' needs the option 'group.id'"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported."),
    ({"subscribe": "a", "kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not supported"),
])
def test_bad_options_fail_with_sparks_message(given_options, message):
    with pytest.raises(ZkKafkaOptionError) as e:
        parse_options(options(**given_options))
    assert message in str(e.value)


def test_exactly_one_of_zookeeper_connect_and_bootstrap_servers_names_the_cluster():
    with pytest.raises(ZkKafkaOptionError, match="Option 'kafka.bootstrap.servers' or 'zookeeper.connect' must be"):
        parse_options({"subscribe": "a"})
    with pytest.raises(ZkKafkaOptionError, match="both name the cluster: set one"):
        parse_options({"subscribe": "a", "kafka.bootstrap.servers": "h:9092", "zookeeper.connect": ZK})
    by_brokers = parse_options({"subscribe": "a", "kafka.bootstrap.servers": " h:9092,g:9093 "})
    assert (by_brokers.bootstrap_servers, by_brokers.zookeeper_connect) == ("h:9092,g:9093", None)
    assert parse_options(options(subscribe="a")).bootstrap_servers is None


def test_options_are_case_insensitive_and_parsed():
    opts = parse_options({"ZOOKEEPER.CONNECT": ZK, "Subscribe": "a, b,a", "StartingOffsets": "EARLIEST",
                          "FAILONDATALOSS": "False", "minpartitions": "4", "includeHeaders": "true"})
    assert (opts.strategy, opts.topics, opts.starting, opts.ending) == ("subscribe", ("a", "b"), "earliest", "latest")
    assert (opts.fail_on_data_loss, opts.min_partitions, opts.include_headers) == (False, 4, True)
    opts = parse_options(options(assign='{"b":[1,0],"a":[2]}', startingOffsets='{"a":{"2":-2},"b":{"0":3,"1":4}}'))
    assert opts.assigned == (("a", 2), ("b", 0), ("b", 1))
    assert opts.starting == {("a", 2): -2, ("b", 0): 3, ("b", 1): 4}


def test_schema_is_sparks_kafka_schema():
    assert kafka_schema().simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                             "timestamp:timestamp,timestampType:int>")
    assert kafka_schema(True).fieldNames()[-1] == "headers"
    assert str(SCHEMA.field("timestamp").type) == "timestamp[us, tz=UTC]"
