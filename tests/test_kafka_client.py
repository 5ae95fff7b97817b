"""The one Kafka client configuration: read from a Java client properties file and the environment,
translated for librdkafka and aiokafka, every refusal one line, no password ever in text."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from services.runtime.errors import UserFacingError
from services.runtime.kafka_client import KafkaClient, parse_security

DEFAULT = "127.0.0.1:29092"
SECRET = 's3=cr\\et"pw'


def _ca(tmp_path: Path) -> Path:
    """A real CA certificate (the local stack's tls helper), so the SSL context can load it."""
    from deploy.local import tls

    return tls.ensure_ca(tmp_path / "ca").cert


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


def test_a_scram_properties_file_in_the_java_form(tmp_path: Path) -> None:
    ca = _ca(tmp_path)
    escaped = SECRET.replace("\\", "\\\\\\\\").replace('"', '\\\\"')
    config = _write(
        tmp_path,
        "# as the Kafka tools take it with --command-config\n"
        "bootstrap.servers=broker-1:9096,broker-2:9096\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="compactor" password="{escaped}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n",
    )
    client = KafkaClient.from_env(DEFAULT, {"KAFKA_CLIENT_CONFIG": str(config)})
    assert client.bootstrap_servers == "broker-1:9096,broker-2:9096"
    assert client.security.username == "compactor" and client.security.password == SECRET
    rd = client.librdkafka()
    assert rd["security.protocol"] == "SASL_SSL" and rd["sasl.mechanism"] == "SCRAM-SHA-512"
    assert rd["sasl.username"] == "compactor" and rd["sasl.password"] == SECRET
    assert rd["ssl.ca.location"] == str(ca) and rd["ssl.endpoint.identification.algorithm"] == "https"
    aio = client.aiokafka()
    assert aio["security_protocol"] == "SASL_SSL" and aio["sasl_mechanism"] == "SCRAM-SHA-512"
    assert aio["sasl_plain_username"] == "compactor" and aio["sasl_plain_password"] == SECRET
    context = aio["ssl_context"]
    assert isinstance(context, ssl.SSLContext) and context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert SECRET not in client.describe() and "***" in client.describe()
    assert SECRET not in repr(client)


def test_environment_overrides_win_over_the_file(tmp_path: Path) -> None:
    config = _write(
        tmp_path,
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";\n',
    )
    env = {
        "KAFKA_CLIENT_CONFIG": str(config),
        "KAFKA_BOOTSTRAP_SERVERS": "k:9093",
        "KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
        "KAFKA_SASL_USERNAME": "agent",
        "KAFKA_SASL_PASSWORD": "from-a-secret",
    }
    with pytest.raises(UserFacingError, match=r"PlainLoginModule, but sasl\.mechanism=SCRAM-SHA-256"):
        KafkaClient.from_env(DEFAULT, env)
    (tmp_path / "client.properties").write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n")
    client = KafkaClient.from_env(DEFAULT, env)
    assert client.bootstrap_servers == "k:9093"
    assert (client.security.mechanism, client.principal, client.security.password) == (
        "SCRAM-SHA-256",
        "agent",
        "from-a-secret",
    )
    # no CA given: the system's trust store, which librdkafka's static OpenSSL must probe for
    assert client.librdkafka()["ssl.ca.location"] == "probe"


def test_mutual_tls_with_a_pem_keystore(tmp_path: Path) -> None:
    from deploy.local import tls

    ca = tls.ensure_ca(tmp_path / "ca")
    leaf = tls.issue(ca, tmp_path / "certs", "ingest", client=True, key_password="kp")
    keystore = leaf.key.with_name("ingest-keystore.pem")
    config = _write(
        tmp_path,
        f"security.protocol=SSL\nssl.truststore.location={ca.cert}\nssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore}\nssl.key.password=kp\nssl.endpoint.identification.algorithm=\n",
    )
    client = KafkaClient.from_env(DEFAULT, {"KAFKA_CLIENT_CONFIG": str(config)})
    rd = client.librdkafka()
    assert rd["ssl.certificate.location"] == rd["ssl.key.location"] == str(keystore)
    assert rd["ssl.key.password"] == "kp" and rd["ssl.endpoint.identification.algorithm"] == "none"
    assert client.ssl_context() is not None and "kp" not in client.describe()
    (tmp_path / "client.properties").write_text(
        f"security.protocol=SSL\nssl.truststore.location={ca.cert}\nssl.keystore.location={keystore}\n"
        "ssl.key.password=wrong\n"
    )
    with pytest.raises(UserFacingError, match=r"ssl\.keystore\.location") as refused:
        KafkaClient.from_env(DEFAULT, {"KAFKA_CLIENT_CONFIG": str(config)})
    assert "wrong" not in str(refused.value)


@pytest.mark.parametrize(
    ("props", "needle"),
    [
        ({"sasl.mechanisms": "PLAIN"}, "'sasl.mechanisms'"),
        ({"ssl.ca.location": "/x"}, "ssl.truststore.location"),
        ({"security.protocol": "SASL_PLAINTEXT"}, "in clear"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism=GSSAPI"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "needs a username and a password"),
        ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "ssl.truststore.type=JKS"),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/nope.pem"}, "no such file"),
        ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "x"}, "use https"),
        ({"ssl.truststore.location": "/x"}, "is PLAINTEXT"),
        ({"security.protocol": "SSL", "sasl.mechanism": "PLAIN"}, "use SASL_SSL"),
        ({"fetch.max.bytes": "1"}, "'fetch.max.bytes'"),
    ],
)
def test_every_setting_not_understood_is_one_line(props: dict[str, str], needle: str) -> None:
    with pytest.raises(UserFacingError) as refused:
        parse_security(props, source="KAFKA_CLIENT_CONFIG=/etc/c.properties")
    message = str(refused.value)
    assert needle in message and "\n" not in message and "KAFKA_CLIENT_CONFIG=/etc/c.properties" in message


def test_a_missing_or_broken_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserFacingError, match="No such file"):
        KafkaClient.from_env(DEFAULT, {"KAFKA_CLIENT_CONFIG": str(tmp_path / "absent.properties")})
    bad_ca = tmp_path / "ca.pem"
    bad_ca.write_text("not a certificate\n")
    config = _write(tmp_path, f"security.protocol=SSL\nssl.truststore.location={bad_ca}\n")
    with pytest.raises(UserFacingError, match=r"ssl\.truststore") as refused:
        KafkaClient.from_env(DEFAULT, {"KAFKA_CLIENT_CONFIG": str(config)})
    assert "\n" not in str(refused.value)


def test_no_file_and_no_overrides_is_plaintext_to_the_default() -> None:
    client = KafkaClient.from_env(DEFAULT, {})
    assert client.librdkafka() == {"bootstrap.servers": DEFAULT}
    assert client.aiokafka() == {"security_protocol": "PLAINTEXT"}
    assert client.ssl_context() is None


@pytest.mark.parametrize("flag", [None, ""])
def test_no_broker_flag_keeps_the_environment_client(flag: str | None) -> None:
    client = KafkaClient.from_env(DEFAULT, {"KAFKA_SECURITY_PROTOCOL": "SSL"})
    assert client.with_bootstrap(flag) is client


def test_a_broker_flag_redirects_but_keeps_the_security_settings() -> None:
    client = KafkaClient.from_env(DEFAULT, {"KAFKA_SECURITY_PROTOCOL": "SSL"})
    moved = client.with_bootstrap("other:9094")
    assert moved.bootstrap_servers == "other:9094"
    assert (moved.security, moved.source) == (client.security, client.source)
    assert moved.librdkafka()["security.protocol"] == "SSL"
