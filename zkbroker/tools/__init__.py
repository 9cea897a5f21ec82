"""Kafka 0.8.2's admin tools as `zkbroker` subcommands, one module per tool (topics, preferred replica election,
partition reassignment); each writes or reads znodes only, the controller does the rest."""
