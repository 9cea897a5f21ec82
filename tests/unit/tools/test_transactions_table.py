"""kafka-transactions.sh's table layout (Kafka 3.0's prettyPrintTable): every cell padded to its column's widest
cell, the header's included, and followed by a tab."""

from zkbroker.tools.transactions import LIST_HEADERS, format_table


def test_cells_are_padded_to_the_widest_of_their_column_and_each_followed_by_a_tab():
    lines = format_table(LIST_HEADERS, [("copier-1", "2", "4000", "Ongoing"), ("a", "10", "7", "CompleteCommit")])
    assert lines == [
        "TransactionalId\tCoordinator\tProducerId\tTransactionState\t",
        "copier-1       \t2          \t4000      \tOngoing         \t",
        "a              \t10         \t7         \tCompleteCommit  \t",
    ]
