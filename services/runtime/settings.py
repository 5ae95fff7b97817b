"""Where Kafka and Postgres are. Environment variables win; the defaults are the local stack.

A real deployment sets KAFKA_BOOTSTRAP_SERVERS (or KAFKA_CLIENT_CONFIG, a Kafka client
properties file: see services/runtime/kafka_client.py) and DATABASE_URL, and never touches the
local stack.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from services.runtime.kafka_client import KafkaClient

REPO_ROOT = Path(__file__).resolve().parents[2]

# Below Linux's ephemeral port range (32768-60999): a client retrying a stopped broker on an
# ephemeral port can be given that very port, connect to itself, and hold it from the next start.
LOCAL_KAFKA_PORT = 29092
LOCAL_KAFKA_CONTROLLER_PORT = 29093
# `up --brokers 3`: node N (1..3) listens on (broker, controller) = LOCAL_CLUSTER_PORTS[N - 1].
LOCAL_CLUSTER_PORTS = ((29192, 29193), (29292, 29293), (29392, 29393))
# `up --secure`: a second node, SASL_SSL only, with its own SCRAM users and ACLs.
LOCAL_SECURE_KAFKA_PORT = 29094
LOCAL_SECURE_KAFKA_CONTROLLER_PORT = 29095
LOCAL_PG_PORT = 25432
LOCAL_PG_DB = "incident_memory"
LOCAL_PG_USER = "incident_memory"
LOCAL_PG_PASSWORD = "incident_memory"


def state_dir() -> Path:
    """Where the local stack keeps its binaries, data, logs and pid files (git-ignored)."""
    return Path(os.environ.get("INCIDENT_MEMORY_STATE_DIR", REPO_ROOT / ".cache")).resolve()


@dataclass(frozen=True)
class Settings:
    kafka: KafkaClient
    database_url: str

    @property
    def kafka_bootstrap_servers(self) -> str:
        return self.kafka.bootstrap_servers

    @classmethod
    def from_env(cls) -> Settings:
        """Read once, at start: a Kafka client setting we do not understand is a UserFacingError here."""
        return cls(
            kafka=KafkaClient.from_env(f"127.0.0.1:{LOCAL_KAFKA_PORT}"),
            database_url=os.environ.get(
                "DATABASE_URL",
                f"postgresql://{LOCAL_PG_USER}:{LOCAL_PG_PASSWORD}@127.0.0.1:{LOCAL_PG_PORT}/{LOCAL_PG_DB}",
            ),
        )
