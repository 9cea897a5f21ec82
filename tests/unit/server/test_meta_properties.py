"""meta.properties as Kafka 3.7 writes it, the storage tool, and a node's check of its log directories."""

from __future__ import annotations

import pytest

from zkbroker.cli import main
from zkbroker.server import meta_properties
from zkbroker.server.meta_properties import MetaProperties, MetaPropertiesError


def test_random_uuids_are_22_characters_of_base64url_never_starting_with_a_dash():
    for _ in range(200):
        text = meta_properties.random_uuid()
        assert len(text) == 22 and not text.startswith("-")
        assert len(meta_properties.parse_uuid(text)) == 16


def test_meta_properties_round_trips_with_the_kraft_version(tmp_path):
    meta_properties.write(str(tmp_path), MetaProperties("fMCL8kv1SWm87L_Md-I2hg", 3001, "JlAJZeIGRBuUwLJt0SvsZg"))
    lines = (tmp_path / "meta.properties").read_text().splitlines()
    assert lines[0] == "#" and lines[1].startswith("#")
    assert lines[2:] == ["cluster.id=fMCL8kv1SWm87L_Md-I2hg", "directory.id=JlAJZeIGRBuUwLJt0SvsZg",
                         "node.id=3001", "version=1"]
    assert meta_properties.check([str(tmp_path)], 3001) == "fMCL8kv1SWm87L_Md-I2hg"


def test_a_node_refuses_an_unformatted_another_nodes_or_a_zookeeper_mode_directory(tmp_path):
    with pytest.raises(MetaPropertiesError, match="No meta.properties found in .*storage format"):
        meta_properties.check([str(tmp_path)], 1)
    meta_properties.write(str(tmp_path), MetaProperties("a" * 22, 2, "b" * 22))
    with pytest.raises(MetaPropertiesError, match="belongs to node 2, not to node.id 1"):
        meta_properties.check([str(tmp_path)], 1)
    (tmp_path / "meta.properties").write_text("version=0\nbroker.id=1\n")
    with pytest.raises(MetaPropertiesError, match="ZooKeeper-mode"):
        meta_properties.check([str(tmp_path)], 1)


def test_directories_of_two_clusters_are_refused(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    meta_properties.write(str(one), MetaProperties("a" * 22, 1, "c" * 22))
    meta_properties.write(str(two), MetaProperties("b" * 22, 1, "d" * 22))
    with pytest.raises(MetaPropertiesError, match="another directory of this node to cluster"):
        meta_properties.check([str(one), str(two)], 1)


def test_storage_format_writes_every_log_dir_and_refuses_a_second_format(tmp_path, capsys):
    config = tmp_path / "controller.properties"
    config.write_text(f"process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@localhost:9093\n"
                      f"controller.listener.names=CONTROLLER\nlisteners=CONTROLLER://localhost:9093\n"
                      f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}\n")
    cluster_id = meta_properties.random_uuid()
    assert main(["storage", "format", "-t", cluster_id, "-c", str(config)]) == 0
    out = capsys.readouterr().out
    assert out == (f"Formatting {tmp_path / 'a'} with metadata.version 3.7-IV4.\n"
                   f"Formatting {tmp_path / 'b'} with metadata.version 3.7-IV4.\n")
    assert meta_properties.check([str(tmp_path / "a"), str(tmp_path / "b")], 1) == cluster_id
    assert (tmp_path / "a" / "bootstrap.checkpoint").exists()
    assert main(["storage", "format", "-t", cluster_id, "-c", str(config)]) == 1
    assert "is already formatted. Use --ignore-formatted" in capsys.readouterr().err
    assert main(["storage", "format", "-t", cluster_id, "-c", str(config), "--ignore-formatted"]) == 0
    assert capsys.readouterr().out == "All of the log directories are already formatted.\n"
    assert main(["storage", "format", "-t", "not-a-uuid", "-c", str(config)]) == 1
    assert "Cluster ID 'not-a-uuid' is not valid" in capsys.readouterr().err
