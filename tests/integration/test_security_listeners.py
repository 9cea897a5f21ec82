"""TLS and SASL listeners with real clients (issue 28, DESIGN §19): confluent-kafka (librdkafka) and kafka-python
over SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, and over SSL with a client certificate; kcat over SSL.
One broker has the four listeners side by side; certificates are made for the test with openssl."""

from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid

import pytest

from tests.integration.harness import create_topic, wait_until_serving
from tests.integration.security_support import ALICE, SecureBroker, add_scram_user
from tests.real_tools import require
from zkbroker.lab.tls import make_certificates

pytestmark = pytest.mark.integration

N = 20


@pytest.fixture
def secure_broker(tmp_path, zk_connect):
    require("openssl")
    sb = SecureBroker(tmp_path, 1, zk_connect, make_certificates(tmp_path / "tls"))
    sb.broker.start()
    wait_until_serving(sb.broker)
    yield sb
    sb.broker.cleanup()


def _ck_round_trip(conf: dict, topic: str) -> list[bytes]:
    """Produce N records, consume them in a group, commit; the values read back."""
    import confluent_kafka as ck

    producer = ck.Producer(conf)
    for i in range(N):
        producer.produce(topic, b"v%d" % i)
    assert producer.flush(30) == 0, "records left unsent"
    consumer = ck.Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
                            "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        values = []
        deadline = time.monotonic() + 60
        while len(values) < N and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        assert len(values) == N, f"read {len(values)} of {N}"
        committed = consumer.commit(asynchronous=False)
        assert committed and all(tp.error is None for tp in committed)
        return values
    finally:
        consumer.close()


def test_confluent_kafka_over_sasl_ssl_with_scram_and_plain_produces_consumes_in_a_group_and_commits(
        secure_broker, zk_connect):
    sb = secure_broker
    # added after the broker started: a user added with `zkbroker configs` needs no restart
    add_scram_user(zk_connect, *ALICE)
    topic = "secure-ck"
    create_topic(zk_connect, topic, 1, 1, [sb.broker])
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"):
        conf = {"bootstrap.servers": sb.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism, "sasl.username": ALICE[0], "sasl.password": ALICE[1],
                "ssl.ca.location": str(sb.certs.ca)}
        assert _ck_round_trip(conf, topic)[-N:] == [b"v%d" % i for i in range(N)], mechanism
    assert sb.broker.log_lines(r"authenticated as User:alice with SCRAM-SHA-512 \(listener SASL_SSL\)")


def test_kafka_python_over_sasl_ssl_scram_and_over_ssl_with_a_client_certificate(secure_broker, zk_connect):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    sb = secure_broker
    add_scram_user(zk_connect, *ALICE)
    topic = "secure-kp"
    create_topic(zk_connect, topic, 1, 1, [sb.broker])
    tls = {"ssl_cafile": str(sb.certs.ca), "ssl_check_hostname": True}
    cases = {
        "SCRAM-SHA-256": {"bootstrap_servers": sb.bootstrap("SASL_SSL"), "security_protocol": "SASL_SSL",
                          "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": ALICE[0],
                          "sasl_plain_password": ALICE[1], **tls},
        "SCRAM-SHA-512": {"bootstrap_servers": sb.bootstrap("SASL_SSL"), "security_protocol": "SASL_SSL",
                          "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": ALICE[0],
                          "sasl_plain_password": ALICE[1], **tls},
        "client certificate": {"bootstrap_servers": sb.bootstrap("SSL"), "security_protocol": "SSL",
                               "ssl_certfile": str(sb.certs.client_cert), "ssl_keyfile": str(sb.certs.client_key),
                               **tls},
    }
    for name, conf in cases.items():
        producer = KafkaProducer(**conf)
        for i in range(N):
            producer.send(topic, b"%s-%d" % (name.encode(), i))
        producer.flush(30)
        producer.close(5)
        group = f"g-{uuid.uuid4().hex[:8]}"
        consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                                 consumer_timeout_ms=20000, **conf)
        values = []
        for msg in consumer:
            values.append(msg.value)
            if values[-1] == b"%s-%d" % (name.encode(), N - 1):
                break
        consumer.commit()
        assert consumer.committed(TopicPartition(topic, 0)) == len(values), name
        consumer.close()
        assert values[-N:] == [b"%s-%d" % (name.encode(), i) for i in range(N)], name
    assert sb.broker.log_lines("authenticated as User:alice with SCRAM-SHA-256")
    # the client certificate's subject is the principal (RFC 2253, most specific first)
    assert sb.broker.log_lines(f"Connection .* on listener SSL: principal User:{sb.certs.client_dn}")


def test_a_wrong_password_is_refused_with_an_authentication_error_and_nothing_else(secure_broker, zk_connect):
    import confluent_kafka as ck

    sb = secure_broker
    add_scram_user(zk_connect, *ALICE)
    errors = []
    producer = ck.Producer({"bootstrap.servers": sb.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": ALICE[0],
                            "sasl.password": "wrong", "ssl.ca.location": str(sb.certs.ca),
                            "error_cb": lambda err: errors.append(err)})
    try:
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            producer.poll(0.2)
        assert errors and errors[0].code() == ck.KafkaError._AUTHENTICATION, errors
        assert "invalid credentials" in errors[0].str()
    finally:
        producer.flush(0)
    assert sb.broker.log_lines("Failed authentication with .* SCRAM-SHA-256")


def test_a_plaintext_client_on_a_tls_port_gets_nothing(secure_broker):
    sb = secure_broker
    api_versions_v0 = struct.pack(">ihhih", 10 + 4, 18, 0, 1, 4) + b"test"
    with socket.create_connection(("127.0.0.1", sb.ports["SSL"]), timeout=10) as sock:
        sock.sendall(api_versions_v0)
        received = b""
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    # no Kafka response: at most a TLS alert record (content type 21), never a size-prefixed frame
    assert received == b"" or received[0] == 21, received[:16]
    # and the TLS port still serves a TLS client
    context = ssl.create_default_context(cafile=str(sb.certs.ca))
    with socket.create_connection(("127.0.0.1", sb.ports["SSL"]), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(api_versions_v0)
        size = struct.unpack(">i", tls.recv(4))[0]
        assert size > 6


def test_kcat_over_ssl_produces_and_consumes(secure_broker, zk_connect):
    import subprocess

    kcat = require("kcat")
    sb = secure_broker
    topic = "secure-kcat"
    create_topic(zk_connect, topic, 1, 1, [sb.broker])
    ssl_args = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={sb.certs.ca}"]
    lines = [f"line-{i}" for i in range(N)]
    subprocess.run([kcat, "-b", sb.bootstrap("SSL"), *ssl_args, "-P", "-t", topic], input="\n".join(lines) + "\n",
                   text=True, check=True, timeout=60)
    out = subprocess.run([kcat, "-b", sb.bootstrap("SSL"), *ssl_args, "-C", "-t", topic, "-o", "beginning", "-e",
                          "-q"], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.split() == lines


def _closed_without_answer(sock: socket.socket) -> bool:
    try:
        return sock.recv(4096) == b""
    except (ConnectionResetError, TimeoutError):
        return True


def test_hostile_sasl_frames_close_only_their_own_connection(secure_broker):
    import random

    from zkbroker.protocol.api import ApiKey, encode_request

    sb = secure_broker
    address = ("127.0.0.1", sb.ports["SASL_PLAINTEXT"])
    # a token announced at 100 MB: refused from its size prefix (sasl.server.max.receive.size), never read
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\0" * 1024)
        assert _closed_without_answer(sock)
    # a request other than ApiVersions or SaslHandshake before authenticating: closed unanswered
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(encode_request(ApiKey.METADATA, 1, 1, "t", {"topics": None}))
        assert _closed_without_answer(sock)
    # garbage after valid SaslHandshake and SaslAuthenticate headers
    rng = random.Random(28)
    for api_key, version in [(ApiKey.SASL_HANDSHAKE, 1), (ApiKey.SASL_AUTHENTICATE, 1)] * 10:
        header = encode_request(api_key, version, 7, "fuzz", {"mechanism": "PLAIN"} if api_key == 17
                                else {"auth_bytes": b""})[4:14 + 4]
        body = header + rng.randbytes(rng.randrange(0, 64))
        with socket.create_connection(address, timeout=10) as sock:
            if api_key == ApiKey.SASL_AUTHENTICATE:  # past the handshake first
                sock.sendall(encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "fuzz", {"mechanism": "PLAIN"}))
                sock.recv(4096)
            sock.sendall(struct.pack(">i", len(body)) + body)
            try:
                sock.recv(4096)  # an answer (a refusal) or the close; never a hang
            except (ConnectionResetError, TimeoutError):
                pass
    # the broker still serves everyone else
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": sb.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "PLAIN", "sasl.username": "bob", "sasl.password": "bob-secret"})
    assert producer.list_topics(timeout=10).brokers
    assert sb.broker.alive()


def test_our_tools_reach_secured_listeners_with_a_command_config(secure_broker, zk_connect):
    import subprocess
    import sys

    sb = secure_broker
    add_scram_user(zk_connect, *ALICE)
    create_topic(zk_connect, "secure-tools", 1, 1, [sb.broker])
    configs = {
        "SASL_SSL": f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username={ALICE[0]}\n"
                    f"sasl.password={ALICE[1]}\nssl.truststore.location={sb.certs.ca}\n",
        "SASL_PLAINTEXT": f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                          'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                          f'username="{ALICE[0]}" password="{ALICE[1]}";\n',
        "SSL": f"security.protocol=SSL\nssl.truststore.location={sb.certs.ca}\n",
    }
    for listener, text in configs.items():
        path = sb.broker.dir / f"{listener}.properties"
        path.write_text(text)
        done = subprocess.run([sys.executable, "-m", "zkbroker", "configs", "--bootstrap-server",
                               sb.bootstrap(listener), "--command-config", str(path), "--describe", "--entity-type",
                               "topics", "--entity-name", "secure-tools"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (listener, done.stderr)
        assert done.stdout.startswith("Dynamic configs for topic secure-tools are:"), (listener, done.stdout)
    # every other tool that reaches brokers, through the one --command-config reader (tools/common.py)
    for argv, expected in ((["topics", "--describe", "--topic", "secure-tools"], "Topic: secure-tools"),
                           (["consumer-groups", "--list"], ""),
                           (["transactions", "list"], "TransactionalId"),
                           (["delete-records", "--offset-json-file", str(_offsets_file(sb.broker.dir))],
                            "partition: secure-tools-0\tlow_watermark: 0")):
        done = subprocess.run([sys.executable, "-m", "zkbroker", argv[0], "--bootstrap-server",
                               sb.bootstrap("SASL_SSL"), "--command-config", str(sb.broker.dir / "SASL_SSL.properties"),
                               *argv[1:]], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and expected in done.stdout, (argv, done.stdout, done.stderr)
    path = sb.broker.dir / "wrong.properties"
    path.write_text(configs["SASL_PLAINTEXT"].replace(ALICE[1], "wrong"))
    done = subprocess.run([sys.executable, "-m", "zkbroker", "configs", "--bootstrap-server",
                           sb.bootstrap("SASL_PLAINTEXT"), "--command-config", str(path), "--describe",
                           "--entity-type", "topics"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "invalid credentials" in done.stderr, done.stderr


def _offsets_file(directory):
    path = directory / "offsets.json"
    path.write_text('{"version":1,"partitions":[{"topic":"secure-tools","partition":0,"offset":0}]}')
    return path


def test_an_admin_client_creates_a_scram_user_who_then_authenticates(secure_broker):
    import confluent_kafka as ck
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    sb = secure_broker
    admin = AdminClient({"bootstrap.servers": sb.bootstrap("PLAINTEXT")})
    upsert = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"dave-secret")
    for future in admin.alter_user_scram_credentials([upsert], request_timeout=60).values():
        assert future.result(60) is None
    described = admin.describe_user_scram_credentials(["dave"], request_timeout=60)["dave"].result(60)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    producer = ck.Producer({"bootstrap.servers": sb.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "dave",
                            "sasl.password": "dave-secret", "ssl.ca.location": str(sb.certs.ca)})
    assert producer.list_topics(timeout=60).brokers
    assert sb.broker.log_lines("authenticated as User:dave with SCRAM-SHA-512")
    deletion = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)
    for future in admin.alter_user_scram_credentials([deletion], request_timeout=60).values():
        assert future.result(60) is None
    errors = []
    refused = ck.Producer({"bootstrap.servers": sb.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                           "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "dave", "sasl.password": "dave-secret",
                           "ssl.ca.location": str(sb.certs.ca), "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        refused.poll(0.2)
    assert errors and errors[0].code() == ck.KafkaError._AUTHENTICATION
