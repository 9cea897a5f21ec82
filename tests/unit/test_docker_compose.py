"""docker/compose.yaml kept true without a Docker daemon: each service is checked against the lab's contracts
(DESIGN §15 names the services), each broker's configuration is loaded through the broker's own
KafkaConfig exactly as its container would load it (the `secured` profile's brokers load what its `secrets`
service generates, made here from that service's own arguments), and Debian's `docker-compose config` validates
the file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.real_tools import require
from zkbroker.client.security import ClientSecurity, inter_broker_security
from zkbroker.config import KafkaConfig
from zkbroker.lab.zookeeper import DOCKER_IMAGE
from zkbroker.zk.paths import split_chroot

DOCKER = Path(__file__).parents[2] / "docker"
COMPOSE = DOCKER / "compose.yaml"
ZOOKEEPERS = ("zookeeper-1", "zookeeper-2", "zookeeper-3")
BROKERS = ("broker-1", "broker-2", "broker-3")
SPARK = ("spark-master", "spark-worker")
SECURED = ("secured-broker-1", "secured-broker-2", "secured-broker-3")
CLIENT_PORT, QUORUM_PORT, ELECTION_PORT = 2181, 2888, 3888
SPARK_MASTER_PORT = 7077


@pytest.fixture(scope="module")
def services() -> dict[str, dict]:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def broker_config(service: dict) -> KafkaConfig:
    """What the container's entrypoint (`zkbroker server /etc/zkbroker/server.properties ...`) loads."""
    entrypoint = (DOCKER / "Dockerfile").read_text().split("ENTRYPOINT", 1)[1]
    assert '["zkbroker", "server", "/etc/zkbroker/server.properties"]' in entrypoint
    command = service["command"]
    assert command[0::2] == ["--override"] * (len(command) // 2), command
    return KafkaConfig.load(str(DOCKER / "server.properties"), command[1::2])


def published(service: dict) -> set[tuple[int, int]]:
    """(host port, container port) pairs."""
    return {tuple(int(p) for p in mapping.split(":")) for mapping in service.get("ports", [])}


def test_the_services_are_the_ensemble_the_brokers_and_spark_and_a_secured_cluster_behind_profiles(services):
    assert set(services) == {*ZOOKEEPERS, *BROKERS, *SPARK, "secrets", *SECURED}
    assert all(services[name].get("profiles") == ["spark"] for name in SPARK)
    assert all(services[name].get("profiles") == ["secured"] for name in ("secrets", *SECURED))
    assert not any("profiles" in services[name] for name in (*ZOOKEEPERS, *BROKERS))


@pytest.mark.parametrize("name", ZOOKEEPERS)
def test_each_zookeeper_is_one_server_of_the_same_three_server_ensemble(services, name):
    service = services[name]
    environment = service["environment"]
    my_id = int(name.rsplit("-", 1)[1])
    assert service["image"] == DOCKER_IMAGE
    assert environment["ZOO_MY_ID"] == str(my_id)
    assert environment["ZOO_SERVERS"].split() == [
        f"server.{n}={other}:{QUORUM_PORT}:{ELECTION_PORT};{CLIENT_PORT}" for n, other in enumerate(ZOOKEEPERS, 1)]
    assert service["healthcheck"]["test"] == ["CMD", "zkServer.sh", "status"]


@pytest.mark.parametrize("name", BROKERS)
def test_each_broker_reaches_every_zookeeper_in_a_chroot_and_advertises_its_reachable_address(services, name):
    service = services[name]
    config = broker_config(service)
    hosts, chroot = split_chroot(config["zookeeper.connect"])
    assert hosts.split(",") == [f"{zk}:{CLIENT_PORT}" for zk in ZOOKEEPERS]
    assert chroot not in ("", "/")
    assert config.broker_id == int(name.rsplit("-", 1)[1])
    # The advertised address is the service name (what the other containers resolve) at the port the broker
    # listens on, published on the host unchanged, so one address serves the network and the host alike.
    assert config.advertised_host == name
    assert config.advertised_port == config["port"]
    assert published(service) == {(config["port"], config["port"])}
    assert set(service["depends_on"]) == set(ZOOKEEPERS)
    assert all(dependency["condition"] == "service_healthy" for dependency in service["depends_on"].values())
    assert tuple(volume.split(":")[1] for volume in service["volumes"]) == config["log.dirs"]


@pytest.mark.parametrize("name", BROKERS)
def test_each_broker_healthcheck_asks_the_broker_itself_at_its_advertised_address(services, name):
    check = services[name]["healthcheck"]["test"]
    config = broker_config(services[name])
    assert check[:3] == ["CMD", "python", "-c"]
    compile(check[3], f"{name} healthcheck", "exec")
    assert f"('{config.advertised_host}', {config.advertised_port}," in check[3]


def test_brokers_have_distinct_ids_ports_and_data_volumes(services):
    configs = [broker_config(services[name]) for name in BROKERS]
    assert len({c.broker_id for c in configs}) == len({c["port"] for c in configs}) == len(BROKERS)
    assert len({services[name]["volumes"][0].split(":")[0] for name in BROKERS}) == len(BROKERS)


def test_the_spark_worker_joins_the_master(services):
    master, worker = services["spark-master"], services["spark-worker"]
    assert master["command"][0] == "org.apache.spark.deploy.master.Master"
    assert (SPARK_MASTER_PORT, SPARK_MASTER_PORT) in published(master)
    assert worker["command"][:2] == ["org.apache.spark.deploy.worker.Worker", f"spark://spark-master:{SPARK_MASTER_PORT}"]
    assert worker["depends_on"] == {"spark-master": {"condition": "service_healthy"}}
    assert all("healthcheck" in services[name] for name in SPARK)


@pytest.fixture(scope="module")
def secured(services, tmp_path_factory) -> dict:
    """What the `secrets` service makes (its entrypoint's own arguments, run here without ZooKeeper): the
    secured brokers' server.properties, loaded as their containers load them, and the admin's client config."""
    require("openssl")
    from zkbroker.lab import compose_security

    entrypoint = services["secrets"]["entrypoint"]
    assert entrypoint[:3] == ["python", "-m", "zkbroker.lab.compose_security"]
    args = compose_security.parser().parse_args(entrypoint[3:])
    directory = tmp_path_factory.mktemp("secured")
    brokers = [compose_security.parse_broker(b) for b in args.broker]
    security = compose_security.write_files(directory, args.zookeeper, brokers)
    configs = {f"secured-broker-{broker_id}": KafkaConfig.load(str(directory / f"broker-{broker_id}.properties"))
               for broker_id, _, _ in brokers}
    return {"args": args, "dir": directory, "configs": configs, "security": security, "brokers": brokers}


def test_the_secrets_service_runs_after_the_ensemble_and_shares_its_volume_with_the_secured_brokers(services):
    secrets = services["secrets"]
    assert set(secrets["depends_on"]) == set(ZOOKEEPERS)
    assert "restart" not in secrets  # a one-shot: the brokers wait for it to complete
    assert secrets["volumes"] == ["secured:/secured"]
    for name in SECURED:
        assert services[name]["depends_on"] == {"secrets": {"condition": "service_completed_successfully"}}
        assert "secured:/secured:ro" in services[name]["volumes"]


@pytest.mark.parametrize("name", SECURED)
def test_each_secured_broker_loads_its_generated_config_a_sasl_ssl_listener_at_its_service_name(services, secured,
                                                                                               name):
    service = services[name]
    broker_id = int(name.rsplit("-", 1)[1])
    assert service["entrypoint"] == ["zkbroker", "server", f"/secured/broker-{broker_id}.properties"]
    config = secured["configs"][name]
    assert config.broker_id == broker_id
    hosts, chroot = split_chroot(config["zookeeper.connect"])
    assert hosts.split(",") == [f"{zk}:{CLIENT_PORT}" for zk in ZOOKEEPERS]
    assert chroot == "/zkbroker-secured" != split_chroot(broker_config(services["broker-1"])["zookeeper.connect"])[1]
    endpoint = config.inter_broker_endpoint
    assert endpoint.security_protocol.value == "SASL_SSL" and (config.advertised_host, endpoint.port) == (
        name, config.port)
    assert published(service) == {(config.port, config.port)}
    assert f"{config.port}:{config.port}" not in {p for b in BROKERS for p in services[b]["ports"]}
    assert set(config["sasl.enabled.mechanisms"]) >= {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert config["ssl.keystore.location"] == str(secured["dir"] / "tls" / "broker.pem")
    login = inter_broker_security(config)
    assert (login.username, login.mechanism) == ("broker", "SCRAM-SHA-512")
    assert tuple(v.split(":")[1] for v in service["volumes"] if not v.startswith("secured:")) == config["log.dirs"]
    check = service["healthcheck"]["test"]
    compile(check[3], f"{name} healthcheck", "exec")
    assert f"('{name}', {config.port}," in check[3] and "/secured/client.properties" in check[3]


def test_the_secured_brokers_certificate_names_every_service_and_the_admin_config_reaches_them(secured):
    directory = secured["dir"]
    text = subprocess.run(["openssl", "x509", "-in", str(directory / "tls" / "broker.pem"), "-noout", "-text"],
                          capture_output=True, text=True, timeout=30, check=True).stdout
    assert all(f"DNS:{name}" in text for name in SECURED)
    admin = ClientSecurity.from_file(str(directory / "client.properties"))
    assert (admin.protocol.value, admin.username, admin.cafile) == ("SASL_SSL", "admin",
                                                                     str(directory / "tls" / "ca.pem"))
    assert admin.password == secured["security"].admin_password
    assert (directory / "client.properties").stat().st_mode & 0o777 == 0o600


def test_the_secrets_service_keeps_passwords_and_certificates_on_a_second_run(secured):
    from zkbroker.lab import compose_security

    ca = (secured["dir"] / "tls" / "ca.pem").read_text()
    again = compose_security.write_files(secured["dir"], secured["args"].zookeeper, secured["brokers"])
    assert again.admin_password == secured["security"].admin_password
    assert (secured["dir"] / "tls" / "ca.pem").read_text() == ca


@pytest.mark.parametrize("profile", [[], ["--profile", "spark"], ["--profile", "secured"]],
                         ids=["default", "spark", "secured"])
def test_docker_compose_config_validates_the_file(profile):
    docker_compose = require("docker-compose")
    done = subprocess.run([docker_compose, "-f", str(COMPOSE), *profile, "config", "--quiet"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
