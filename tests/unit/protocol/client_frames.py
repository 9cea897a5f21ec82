"""ApiVersions v3 requests as real clients send them (frame payloads: header v2 and body, no size prefix), recorded
on 2026-11-28 with ``python -m tests.unit.protocol.record_client_frames`` against a listening socket.

Each opened a connection with it (kafka-python first with v4, retried with v3 after the v0-format
UNSUPPORTED_VERSION answer, hence its correlation id 2).
"""

#: confluent-kafka 2.16.1 (librdkafka 2.16.0), a Producer: client id "rdkafka", software
#: "confluent-kafka-python" "2.16.1-rdkafka-2.16.0".
CONFLUENT_KAFKA = bytes.fromhex(
    "0012000300000001000772646b61666b610017636f6e666c75656e742d6b61666b612d707974686f6e16322e31362e312d72646b61666b"
    "612d322e31362e3000"
)

#: kafka-python 3.0.12, a KafkaConsumer: client id "kafka-python-3.0.12", software "kafka-python" "3.0.12".
KAFKA_PYTHON = bytes.fromhex(
    "001200030000000200136b61666b612d707974686f6e2d332e302e3132000d6b61666b612d707974686f6e07332e302e313200"
)

#: kcat 1.7.1 (librdkafka 2.0.2 built in), ``kcat -L``: client id "rdkafka", software "librdkafka" "2.0.2".
KCAT = bytes.fromhex("0012000300000001000772646b61666b61000b6c696272646b61666b6106322e302e3200")
