"""`zkbroker consumer-groups --describe`'s table, in Kafka 2.x's columns and widths."""

from __future__ import annotations

from zkbroker.tools.consumer_groups import Row, format_describe


def test_describe_table_has_kafkas_header_widths_and_dashes():
    rows = [Row("g", "orders", 0, 5, 10, "consumer-1-3f2a", "/127.0.0.1", "consumer-1"),
            Row("g", "orders", 1, None, 7, "consumer-1-3f2a", "/127.0.0.1", "consumer-1"),
            Row("g", "orders", 2, 3, 3, None, None, None)]
    assert format_describe(rows) == [
        "",
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             "
        "CONSUMER-ID     HOST            CLIENT-ID",
        "g               orders          0          5               10              5               "
        "consumer-1-3f2a /127.0.0.1      consumer-1",
        "g               orders          1          -               7               -               "
        "consumer-1-3f2a /127.0.0.1      consumer-1",
        "g               orders          2          3               3               0               "
        "-               -               -",
    ]


def test_long_values_widen_their_columns():
    rows = [Row("a-rather-long-group-name", "t", 0, 1, 1, "m" * 40, "/10.0.0.1", "c")]
    header, row = format_describe(rows)[1:]
    assert header.index("TOPIC") == row.index(" t ") + 1 == len("a-rather-long-group-name") + 1
    assert header.index("HOST") == row.index("/10.0.0.1") == header.index("CONSUMER-ID") + 41
