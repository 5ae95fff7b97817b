"""Three local KRaft nodes in one cluster: `incident-memory up --brokers 3`, and the fault tests.

Each node is kafka_node's node (the same template, JVM flags and jars) with its own node.id, ports
and directory (<root>/node-N), one shared cluster id, and a static three-voter controller quorum
(`controller.quorum.voters=1@127.0.0.1:c1,2@127.0.0.1:c2,3@127.0.0.1:c3`, so the storage is
formatted without --standalone). Every node is broker and controller. The internal topics (consumer
offsets, transaction state) and new topics get 3 replicas with min.insync.replicas=2: an acks=all
write is acknowledged once two replicas hold it, so any one node can die or restart without an
acknowledged write being lost and without writes stopping.

`local()` is the stack's cluster (<state>/kafka-cluster, settings.LOCAL_CLUSTER_PORTS); `isolated()`
is a test's own, on its own ports and directory, which it may kill and restart node by node.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.local import kafka_node, procs
from services.runtime import settings
from services.runtime.errors import UserFacingError

REPLICATION = 3
MIN_INSYNC_REPLICAS = 2

_READY_GROUP = "incident-memory-cluster-ready"  # only asked for its offsets, never joined
_QUIET = logging.getLogger("incident_memory.kafka_cluster.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False  # a node that is down on purpose is not news


@dataclass(frozen=True)
class Node:
    node_id: int
    port: int
    controller_port: int
    root: Path

    @property
    def paths(self) -> kafka_node.KafkaPaths:
        return kafka_node.KafkaPaths(self.root)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def pid(self) -> int | None:
        """The node's pid while it runs (pid file + command line), else None."""
        return kafka_node.running_pid(self.paths)

    def ports_free(self) -> bool:
        return not any(_accepts(port) for port in (self.port, self.controller_port))


@dataclass(frozen=True)
class Cluster:
    root: Path
    ports: tuple[tuple[int, int], ...] = (
        settings.LOCAL_CLUSTER_PORTS
    )  # (broker, controller) of node 1, 2, ...
    jars: Path | None = None  # resolved Kafka jars; None: the local stack's (kafka_node.paths().libs)

    def __post_init__(self) -> None:
        if len(self.ports) < REPLICATION:
            raise ValueError(f"a cluster needs at least {REPLICATION} nodes for replication {REPLICATION}")

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(
            Node(i, port, controller_port, self.root / f"node-{i}")
            for i, (port, controller_port) in enumerate(self.ports, start=1)
        )

    def node(self, node_id: int) -> Node:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id} in {self.root}")

    @property
    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.nodes)

    @property
    def voters(self) -> str:
        return ",".join(f"{node.node_id}@127.0.0.1:{node.controller_port}" for node in self.nodes)

    def member(self, node: Node) -> kafka_node.Member:
        return kafka_node.Member(node.node_id, self.voters, REPLICATION, MIN_INSYNC_REPLICAS)

    def cluster_id(self) -> str:
        """One cluster id for every node (22 chars of base64url of a uuid4), kept in <root>/cluster_id."""
        self.root.mkdir(parents=True, exist_ok=True)
        return kafka_node.cluster_id(kafka_node.KafkaPaths(self.root))

    def pids(self) -> dict[int, int | None]:
        return {node.node_id: node.pid() for node in self.nodes}

    # ---- start, stop, hurt ------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> dict[int, int]:
        """Start every node that is not running, and wait until each answers and the cluster shows all
        its brokers. Returns {node id: pid}.

        The nodes are launched together: a voter answers nothing until a majority of the quorum runs."""
        launched = {node.node_id: self._launch(node) for node in self.nodes if node.pid() is None}
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            kafka_node.wait_ready(
                node.paths, _left(deadline), launched.get(node.node_id), address=node.address
            )
        self.wait_brokers(_left(deadline))
        self.wait_group_coordinator(_left(deadline))
        return {node.node_id: _must(node.pid(), node) for node in self.nodes}

    def start_node(self, node_id: int, timeout: float = 120.0) -> int:
        """Start one node again on its data (the others must run: it needs the quorum to answer).
        Waits until its ports are free first: a killed JVM's threads close them a moment after it dies."""
        node = self.node(node_id)
        pid = node.pid()
        if pid is not None:
            return pid
        deadline = time.monotonic() + timeout
        while not node.ports_free():
            if time.monotonic() > deadline:
                raise UserFacingError(
                    f"node {node_id}'s ports {node.port}/{node.controller_port} stay in use"
                )
            time.sleep(0.2)
        proc = self._launch(node)
        kafka_node.wait_ready(node.paths, _left(deadline), proc, address=node.address)
        return proc.pid

    def stop_node(self, node_id: int) -> bool:
        """A graceful stop (SIGTERM: a controlled shutdown moves its leaderships away first)."""
        return kafka_node.stop(self.node(node_id).paths)

    def kill_node(self, node_id: int, timeout: float = 30.0) -> int:
        """kill -9 one node and wait until it is gone. Returns the pid killed."""
        node = self.node(node_id)
        pid = node.pid()
        if pid is None:
            raise UserFacingError(f"node {node_id} of {self.root} is not running")
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while procs.is_running(pid, str(node.paths.config)):
            if time.monotonic() > deadline:
                raise UserFacingError(f"node {node_id} (pid {pid}) survived SIGKILL for {timeout:g}s")
            _reap(pid)
            time.sleep(0.05)
        _reap(pid)
        node.paths.pid_file.unlink(missing_ok=True)
        return pid

    def restart_node(self, node_id: int, timeout: float = 120.0) -> int:
        """Graceful stop, then start again on the same data. Returns the new pid."""
        self.stop_node(node_id)
        return self.start_node(node_id, timeout)

    def stop(self) -> list[int]:
        """Stop every node, together (one by one, the last ones would wait for a quorum that is gone).
        Returns the ids of the nodes that were running."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            stopped = list(pool.map(lambda node: kafka_node.stop(node.paths), self.nodes))
        return [node.node_id for node, was in zip(self.nodes, stopped, strict=True) if was]

    def _launch(self, node: Node) -> subprocess.Popen[bytes]:
        p = node.paths
        kafka_node.link_jars(p, self.jars)
        if not p.cluster_id_file.is_file():
            p.cluster_id_file.write_text(self.cluster_id() + "\n")
        return kafka_node.launch(p, node.port, node.controller_port, self.member(node))

    # ---- health -----------------------------------------------------------------------------

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "logger": _QUIET}
        return AdminClient(config)

    def brokers(self, timeout: float = 10.0) -> set[int]:
        """The broker ids the cluster's metadata lists right now (the live, unfenced ones)."""
        return set(self.admin().list_topics(timeout=timeout).brokers)

    def wait_brokers(self, timeout: float = 60.0) -> None:
        want = {node.node_id for node in self.nodes}
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        while True:
            try:
                seen = self.brokers(timeout=min(5.0, _left(deadline, 0.5)))
            except Exception:  # KafkaException while a node is still starting
                seen = set()
            if seen == want:
                return
            if time.monotonic() > deadline:
                raise UserFacingError(
                    f"the cluster at {self.bootstrap} lists brokers {sorted(seen)}, not {sorted(want)}"
                )
            time.sleep(0.2)

    def wait_group_coordinator(self, timeout: float = 60.0) -> None:
        """Wait until a group coordinator answers, then until every partition is in sync.

        The first group request creates __consumer_offsets; until its partitions are loaded, group
        requests fail or hang (seen: a service's start-up group check timing out after 10 s on a
        cluster started seconds before). A cluster is ready once that is over.

        Asked with a consumer's OffsetFetch, not the admin API's DescribeConsumerGroups: librdkafka can
        abort the whole process on the latter while the coordinator moves (librdkafka issue #4605;
        seen here on a cluster seconds old)."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        probe = Consumer({"bootstrap.servers": self.bootstrap, "group.id": _READY_GROUP, "logger": _QUIET})
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    probe.committed([TopicPartition("__consumer_offsets", 0)], timeout=5.0)
                    break
                except KafkaException as exc:  # COORDINATOR_NOT_AVAILABLE, ..._LOAD_IN_PROGRESS, a timeout
                    if time.monotonic() > deadline:
                        raise UserFacingError(
                            f"the cluster at {self.bootstrap} has no group coordinator after {timeout:g}s: "
                            f"{exc.args[0]}"
                        ) from None
                    time.sleep(0.2)
        finally:
            probe.close()
        self.wait_fully_replicated(_left(deadline))

    def under_replicated(self, timeout: float = 10.0) -> list[tuple[str, int]]:
        """Every partition (internal topics included) whose in-sync replicas are fewer than its
        replicas, or that has no leader."""
        topics = self.admin().list_topics(timeout=timeout).topics
        return sorted(
            (name, pid)
            for name, topic in topics.items()
            for pid, part in topic.partitions.items()
            if part.leader < 0 or len(part.isrs) < len(part.replicas)
        )

    def wait_fully_replicated(self, timeout: float = 120.0) -> float:
        """Wait until no partition is under-replicated; returns the seconds it took."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        left: list[tuple[str, int]] = []
        while True:
            try:
                left = self.under_replicated(timeout=min(10.0, _left(deadline, 0.5)))
                if not left:
                    return time.monotonic() - t0
            except Exception:  # a metadata request that timed out: ask again
                pass
            if time.monotonic() > deadline:
                raise UserFacingError(
                    f"{len(left)} partitions still under-replicated after {timeout:g}s, e.g. {left[:5]}"
                )
            time.sleep(0.2)

    def leader(self, topic: str, partition: int, timeout: float = 10.0) -> int:
        """The node id leading `topic`'s `partition` (-1: none right now)."""
        meta = self.admin().list_topics(topic=topic, timeout=timeout).topics[topic]
        return int(meta.partitions[partition].leader)


def local(state: Path | None = None) -> Cluster:
    """The local stack's cluster: <state>/kafka-cluster, on settings.LOCAL_CLUSTER_PORTS, with the jars
    `kafka_node.build_classpath` resolves for the single node."""
    state = state or settings.state_dir()
    return Cluster(state / "kafka-cluster", settings.LOCAL_CLUSTER_PORTS, kafka_node.paths(state).libs)


def isolated(root: Path, ports: tuple[tuple[int, int], ...], timeout: float = 120.0) -> Cluster:
    """Start (or start again, on its data) a cluster of a test's own under `root`, on `ports`
    ((broker, controller) per node). It reuses the local stack's jars: run `incident-memory up` once
    first. Stop it with `.stop()`; hurt it with `.kill_node(n)`, `.stop_node(n)`, `.start_node(n)`."""
    cluster = Cluster(root, ports)
    cluster.start(timeout)
    return cluster


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _left(deadline: float, floor: float = 1.0) -> float:
    return max(floor, deadline - time.monotonic())


def _must(pid: int | None, node: Node) -> int:
    if pid is None:
        raise UserFacingError(
            f"node {node.node_id} is not running; last lines of its log:\n"
            + procs.tail(node.paths.logs / "server.log")
        )
    return pid


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # our child (a test started it): collect it, or it stays a zombie
