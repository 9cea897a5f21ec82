"""`zkbroker configs` for users and clients (DESIGN §19): a SCRAM mechanism's `[iterations=N,password=P]` is stored
as its credential, never the password; quotas must be numbers; clients take quotas only."""

import pytest

from zkbroker.security.scram import ScramCredential, ScramServer
from zkbroker.tools.common import ToolError
from zkbroker.tools.configs import _user_configs, parse_configs_to_add


def test_a_scram_password_becomes_its_credential():
    added = parse_configs_to_add("SCRAM-SHA-256=[iterations=8192,password=alice-secret],producer_byte_rate=1024")
    stored = _user_configs(added)
    assert stored["producer_byte_rate"] == "1024"
    credential = ScramCredential.parse(stored["SCRAM-SHA-256"])
    assert credential.iterations == 8192 and "alice-secret" not in stored["SCRAM-SHA-256"]
    from kafka.net.sasl.scram import ScramClient

    server = ScramServer("SCRAM-SHA-256", {"alice": credential}.get)
    client = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
    client.process_server_first_message(server.evaluate_response(client.first_message()))
    client.process_server_final_message(server.evaluate_response(client.final_message()))
    assert server.principal == "User:alice"


@pytest.mark.parametrize(("text", "scram_allowed", "message"), [
    ("SCRAM-SHA-256=[iterations=10]", True, "needs password"),
    ("SCRAM-SHA-256=[iterations=100,password=p]", True, "between 4096 and 16384"),
    ("producer_byte_rate=fast", True, "must be a number"),
    ("SCRAM-SHA-256=[password=p]", False, "known: producer_byte_rate"),
    ("retention.ms=1", True, "Invalid config"),
])
def test_bad_user_and_client_configs_are_refused(text, scram_allowed, message):
    with pytest.raises(ToolError, match=message):
        _user_configs(parse_configs_to_add(text), scram_allowed)
