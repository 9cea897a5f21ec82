"""docker/compose.yaml kept true without a Docker daemon: each service is checked against the lab's contracts
(DESIGN §15 names the services), each broker's configuration is loaded through the broker's own
KafkaConfig exactly as its container would load it, and Debian's `docker-compose config` validates the file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.real_tools import require
from zkbroker.config import KafkaConfig
from zkbroker.lab.zookeeper import DOCKER_IMAGE
from zkbroker.zk.paths import split_chroot

DOCKER = Path(__file__).parents[2] / "docker"
COMPOSE = DOCKER / "compose.yaml"
ZOOKEEPERS = ("zookeeper-1", "zookeeper-2", "zookeeper-3")
BROKERS = ("broker-1", "broker-2", "broker-3")
SPARK = ("spark-master", "spark-worker")
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


def test_the_services_are_the_ensemble_the_brokers_and_spark_behind_a_profile(services):
    assert set(services) == {*ZOOKEEPERS, *BROKERS, *SPARK}
    assert all(services[name].get("profiles") == ["spark"] for name in SPARK)
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


@pytest.mark.parametrize("profile", [[], ["--profile", "spark"]], ids=["default", "spark"])
def test_docker_compose_config_validates_the_file(profile):
    docker_compose = require("docker-compose")
    done = subprocess.run([docker_compose, "-f", str(COMPOSE), *profile, "config", "--quiet"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
