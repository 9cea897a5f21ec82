"""consumer-groups --reset-offsets' pure parts: Java's Duration and Kafka's datetime formats, the clamp to the log
with Kafka's warning, and the NEW-OFFSET table."""

import datetime

import pytest

from zkbroker.tools.common import ToolError
from zkbroker.tools.consumer_group_offsets import (
    clamp,
    format_reset,
    parse_datetime,
    parse_duration_ms,
    parse_topic_arguments,
)


@pytest.mark.parametrize("text, ms", [("PT1H", 3_600_000), ("P1DT2M", 86_520_000), ("PT0.5S", 500),
                                      ("-PT10S", -10_000), ("pt30m", 1_800_000)])
def test_durations_parse_as_java_does(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["P", "1H", "PT", "PTxS", ""])
def test_a_bad_duration_is_refused_in_javas_words(text):
    with pytest.raises(ToolError, match="cannot be parsed to a Duration"):
        parse_duration_ms(text)


def test_datetimes_with_a_zone_and_without_one():
    assert parse_datetime("2020-01-02T03:04:05.678Z") == 1577934245678
    assert parse_datetime("2020-01-02T04:04:05.678+01:00") == 1577934245678
    local = datetime.datetime(2020, 1, 2, 3, 4, 5).astimezone()
    assert parse_datetime("2020-01-02T03:04:05") == int(local.timestamp() * 1000)
    with pytest.raises(ToolError, match="Error parsing timestamp"):
        parse_datetime("yesterday")


def test_topic_arguments_name_every_partition_or_some():
    assert parse_topic_arguments(["a", "b:0,2"]) == [("a", None), ("b", [0, 2])]
    with pytest.raises(ToolError):
        parse_topic_arguments(["b:x"])


def test_an_offset_outside_the_log_is_set_to_the_nearer_end_with_kafkas_warning(capsys):
    assert clamp(("t", 0), 5, 2, 9) == 5
    assert clamp(("t", 0), 50, 2, 9) == 9
    assert clamp(("t", 1), 0, 2, 9) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["New offset (50) is higher than latest offset for topic partition t-0. Value will be set to 9",
                   "New offset (0) is lower than earliest offset for topic partition t-1. Value will be set to 2"]


def test_the_reset_table_is_kafkas():
    assert format_reset("g", {("t", 1): 7, ("t", 0): 3}) == [
        "",
        "GROUP                          TOPIC                          PARTITION  NEW-OFFSET     ",
        "g                              t                              0          3              ",
        "g                              t                              1          7              "]
    assert format_reset("g", {}) == []
