"""The local Kafka node configs: the single node unchanged, the three-node cluster's, and the overlay.

Rendered without starting anything; the overlay is read back by Java's own java.util.Properties,
the way the broker reads it. The cluster itself runs in tests/reliability/test_cluster.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.local import kafka_cluster, kafka_node
from services.runtime import settings
from services.runtime.errors import UserFacingError

PORTS = ((21192, 21193), (21292, 21293), (21392, 21393))


def props(path: Path) -> dict[str, str]:
    """key=value lines, the last occurrence winning (enough for the template, which has no escapes)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def test_the_single_node_config_is_the_stacks_default(tmp_path: Path) -> None:
    p = kafka_node.KafkaPaths(tmp_path)
    kafka_node.write_config(p)
    got = props(p.config)
    port, controller = settings.LOCAL_KAFKA_PORT, settings.LOCAL_KAFKA_CONTROLLER_PORT
    assert got["node.id"] == "1"
    assert got["controller.quorum.voters"] == f"1@127.0.0.1:{controller}"
    assert got["listeners"] == f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "transaction.state.log.min.isr", "share.coordinator.state.topic.replication.factor",
                "share.coordinator.state.topic.min.isr", "min.insync.replicas", "default.replication.factor"):  # fmt: skip
        assert got[key] == "1", key
    assert got["log.dirs"] == str(p.data)


def test_each_cluster_node_has_its_id_ports_and_dirs_and_one_quorum(tmp_path: Path) -> None:
    cluster = kafka_cluster.Cluster(tmp_path, PORTS)
    configs = {}
    for node in cluster.nodes:
        node.root.mkdir(parents=True)
        kafka_node.write_config(node.paths, node.port, node.controller_port, cluster.member(node))
        configs[node.node_id] = props(node.paths.config)
    voters = "1@127.0.0.1:21193,2@127.0.0.1:21293,3@127.0.0.1:21393"
    for node_id, (port, controller) in enumerate(PORTS, start=1):
        got = configs[node_id]
        assert got["node.id"] == str(node_id)
        assert got["process.roles"] == "broker,controller"
        assert got["controller.quorum.voters"] == voters
        assert got["listeners"] == f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"
        assert got["log.dirs"] == str(tmp_path / f"node-{node_id}" / "data")
        for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                    "share.coordinator.state.topic.replication.factor", "default.replication.factor"):  # fmt: skip
            assert got[key] == "3", key
        for key in (
            "transaction.state.log.min.isr",
            "share.coordinator.state.topic.min.isr",
            "min.insync.replicas",
        ):
            assert got[key] == "2", key
    assert cluster.bootstrap == "127.0.0.1:21192,127.0.0.1:21292,127.0.0.1:21392"


def test_the_local_cluster_uses_the_settings_ports_and_the_stacks_jars(tmp_path: Path) -> None:
    cluster = kafka_cluster.local(tmp_path)
    assert cluster.ports == settings.LOCAL_CLUSTER_PORTS
    assert cluster.root == tmp_path / "kafka-cluster"
    assert cluster.jars == kafka_node.paths(tmp_path).libs
    taken = {settings.LOCAL_KAFKA_PORT, settings.LOCAL_KAFKA_CONTROLLER_PORT, settings.LOCAL_PG_PORT}
    ports = [port for pair in cluster.ports for port in pair]
    assert len(set(ports)) == 6 and not taken & set(ports) and max(ports) < 32768


def test_up_refuses_a_broker_count_it_cannot_start() -> None:
    from deploy.local import stack

    with pytest.raises(UserFacingError, match="--brokers must be 1 or 3"):
        stack.up(brokers=2)


def test_migrate_refuses_a_min_isr_above_the_replication() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "services.cli", "migrate", "--replication-factor", "1", "--min-insync-replicas", "2"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "incident-memory migrate: --min-insync-replicas must be between 1 and --replication-factor (1), got 2"
    ]


PROBE = """
import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Properties;

public class Probe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) { props.load(in); }  // as Kafka's Utils.loadProps
        for (int i = 1; i < args.length; i++) {
            String key = new String(HexFormat.of().parseHex(args[i]), StandardCharsets.UTF_8);
            String value = props.getProperty(key);
            System.out.println(value == null ? "-" : HexFormat.of().formatHex(value.getBytes(StandardCharsets.UTF_8)));
        }
    }
}
"""


@pytest.mark.stack  # needs `java`, which the local stack installs
def test_the_overlay_wins_and_reads_back_verbatim_in_java(tmp_path: Path) -> None:
    java = shutil.which("java")
    assert java, "java is not installed (`incident-memory up` installs it)"
    extra = {
        "node.id": "7",  # overrides the template's
        "listener.name.broker.scram-sha-512.sasl.jaas.config": (
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="s3#cr=t!";'
        ),
        "ssl.keystore.location": "C:\\keys\\broker.pem",
        "odd key=with:separators#and!marks": "  leading blanks, ümlaut, 😀, tab\there",
        "multi.line": "one\ntwo\r\nthree",
    }
    p = kafka_node.KafkaPaths(tmp_path)
    kafka_node.write_config(p, 21092, 21093, extra=extra)
    (tmp_path / "Probe.java").write_text(PROBE)
    keys = [*extra, "process.roles"]
    result = subprocess.run(
        [java, str(tmp_path / "Probe.java"), str(p.config), *(k.encode().hex() for k in keys)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    read = [bytes.fromhex(v).decode() if v != "-" else None for v in result.stdout.split()]
    assert read == [*extra.values(), "broker,controller"]


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """One uuid4 in 64 encodes to an id starting with "-", which the storage tool's parser takes for an
    option ("--cluster-id: expected one argument"): a CI run failed so. Such ids are drawn again."""
    import uuid

    dashed = uuid.UUID(bytes=b"\xf8" + bytes(15))  # base64url "-A..."
    plain = uuid.UUID(bytes=bytes(16))
    draws = iter([dashed, dashed, plain])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))  # the module kafka_node draws from
    value = kafka_node.cluster_id(kafka_node.KafkaPaths(tmp_path))
    assert not value.startswith("-") and len(value) == 22
    assert kafka_node.cluster_id(kafka_node.KafkaPaths(tmp_path)) == value  # kept beside the data
