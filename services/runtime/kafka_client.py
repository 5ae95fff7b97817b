"""One Kafka client configuration, read once, translated for each client library.

The source is the Kafka convention: a client properties file (`KAFKA_CLIENT_CONFIG=path`, the
keys the Java tools take with `--command-config`), then environment overrides
(`KAFKA_SECURITY_PROTOCOL`, `KAFKA_SASL_USERNAME`, ...). `KafkaClient.librdkafka()` feeds
confluent-kafka and `KafkaClient.aiokafka()` feeds aiokafka (and so faust).

Supported: PLAINTEXT, SSL (a PEM CA or the system's, hostname check, mutual TLS with a PEM
keystore) and SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN. A key this module does not
understand is a one-line `UserFacingError` at start: a silently ignored `ssl.truststore.location`
would mean a client that trusts the wrong CA, or one that never connects and never says why.
Passwords never leave this module in text meant for people: `describe()` prints `***`.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from services.runtime.errors import UserFacingError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

# The properties understood, and the environment variable that overrides each (None: file only).
KEYS: dict[str, str | None] = {
    "bootstrap.servers": "KAFKA_BOOTSTRAP_SERVERS",
    "security.protocol": "KAFKA_SECURITY_PROTOCOL",
    "sasl.mechanism": "KAFKA_SASL_MECHANISM",
    "sasl.jaas.config": None,  # username and password: KAFKA_SASL_USERNAME / KAFKA_SASL_PASSWORD
    "ssl.truststore.type": None,
    "ssl.truststore.location": "KAFKA_SSL_CA_LOCATION",
    "ssl.truststore.certificates": None,
    "ssl.endpoint.identification.algorithm": "KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM",
    "ssl.keystore.type": None,
    "ssl.keystore.location": "KAFKA_SSL_KEYSTORE_LOCATION",
    "ssl.key.password": "KAFKA_SSL_KEY_PASSWORD",
    "client.id": None,  # accepted: every client names itself anyway
}
USERNAME_ENV = "KAFKA_SASL_USERNAME"
PASSWORD_ENV = "KAFKA_SASL_PASSWORD"
CONFIG_ENV = "KAFKA_CLIENT_CONFIG"
_HINTS = {
    "sasl.mechanisms": "the Java name is sasl.mechanism",
    "ssl.ca.location": "the Java name is ssl.truststore.location (a PEM file)",
    "sasl.username": "put it in sasl.jaas.config or KAFKA_SASL_USERNAME",
    "sasl.password": "put it in sasl.jaas.config or KAFKA_SASL_PASSWORD",
    "ssl.truststore.password": "only PEM trust stores are supported, and they have no password",
    "ssl.keystore.password": "only PEM keystores are supported: their key's password is ssl.key.password",
}


@dataclass(frozen=True)
class KafkaSecurity:
    """How a client proves who it is and checks who the broker is. The default is PLAINTEXT."""

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None  # PEM; None with ca_pem None = the system's trust store
    ca_pem: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    keystore_file: str | None = None  # PEM: private key + certificate chain (mutual TLS)
    key_password: str | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol == "SASL_SSL"


@dataclass(frozen=True)
class KafkaClient:
    """Where the brokers are and how to talk to them; the one value every Kafka client is built from."""

    bootstrap_servers: str
    security: KafkaSecurity = KafkaSecurity()
    source: str = "KAFKA_BOOTSTRAP_SERVERS"  # named in errors: where the settings came from

    @classmethod
    def plaintext(cls, bootstrap_servers: str) -> KafkaClient:
        return cls(bootstrap_servers)

    @classmethod
    def from_env(cls, default_bootstrap: str, environ: Mapping[str, str] | None = None) -> KafkaClient:
        """Read KAFKA_CLIENT_CONFIG (if set), then the environment overrides; check it all once."""
        env = os.environ if environ is None else environ
        path = env.get(CONFIG_ENV, "").strip()
        props = read_properties(Path(path)) if path else {}
        for key, var in KEYS.items():
            if var and env.get(var, "").strip():
                props[key] = env[var].strip()
        username = env.get(USERNAME_ENV) or None
        password = env.get(PASSWORD_ENV) or None
        source = f"{CONFIG_ENV}={path}" if path else "the KAFKA_* environment"
        bootstrap = props.pop("bootstrap.servers", "") or default_bootstrap
        security = parse_security(props, username=username, password=password, source=source)
        client = cls(bootstrap, security, source)
        client.ssl_context()  # a missing or unreadable CA or keystore fails here, at start
        return client

    def with_bootstrap(self, bootstrap_servers: str | None) -> KafkaClient:
        """The same client settings for other brokers: a command's --broker or --bootstrap-servers
        (None or empty: these settings unchanged). The security settings always come from the
        environment, so a flag can redirect a service, never weaken how it connects."""
        return replace(self, bootstrap_servers=bootstrap_servers) if bootstrap_servers else self

    @property
    def principal(self) -> str | None:
        return self.security.username

    def describe(self) -> str:
        """One line for logs and `up`: protocol, user, CA. Never a password."""
        s = self.security
        parts = [self.bootstrap_servers, s.protocol]
        if s.sasl:
            parts.append(f"{s.mechanism} as {s.username} (password ***)")
        if s.tls:
            parts.append(f"CA {s.ca_file or ('inline' if s.ca_pem else 'system')}")
            parts.append("hostname checked" if s.check_hostname else "hostname NOT checked")
            if s.keystore_file:
                parts.append(f"client certificate {s.keystore_file}")
        return ", ".join(parts)

    def librdkafka(self) -> dict[str, Any]:
        """confluent-kafka's (librdkafka's) names for the same settings."""
        s = self.security
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        if s.protocol == "PLAINTEXT":
            return config
        config["security.protocol"] = s.protocol
        if s.ca_file:
            config["ssl.ca.location"] = s.ca_file
        elif s.ca_pem:
            config["ssl.ca.pem"] = s.ca_pem
        else:
            config["ssl.ca.location"] = "probe"  # the wheel's OpenSSL is static: look for the system's CAs
        config["ssl.endpoint.identification.algorithm"] = "https" if s.check_hostname else "none"
        if s.keystore_file:
            config["ssl.certificate.location"] = s.keystore_file
            config["ssl.key.location"] = s.keystore_file
            if s.key_password:
                config["ssl.key.password"] = s.key_password
        if s.sasl:
            config["sasl.mechanism"] = s.mechanism
            config["sasl.username"] = s.username
            config["sasl.password"] = s.password
        return config

    def aiokafka(self) -> dict[str, Any]:
        """aiokafka's keyword arguments (faust passes the same through its credentials)."""
        s = self.security
        kwargs: dict[str, Any] = {"security_protocol": s.protocol}
        if s.tls:
            kwargs["ssl_context"] = self.ssl_context()
        if s.sasl:
            kwargs["sasl_mechanism"] = s.mechanism
            kwargs["sasl_plain_username"] = s.username
            kwargs["sasl_plain_password"] = s.password
        return kwargs

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for Python clients; None without TLS. Raises UserFacingError on bad files."""
        s = self.security
        if not s.tls:
            return None
        try:
            context = ssl.create_default_context(cafile=s.ca_file, cadata=s.ca_pem)
            context.check_hostname = s.check_hostname
            if s.keystore_file:
                context.load_cert_chain(s.keystore_file, password=s.key_password)
        except (OSError, ssl.SSLError, ValueError) as exc:
            which = (
                "ssl.keystore.location" if s.keystore_file and "cafile" not in str(exc) else "ssl.truststore"
            )
            raise UserFacingError(
                f"Kafka client TLS settings ({self.source}): {which}: {_one_line(exc)}"
            ) from None
        return context


def read_properties(path: Path) -> dict[str, str]:
    """A Java client properties file as a dict (comments, `:`/`=`, line continuations, escapes)."""
    from jproperties import Properties

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserFacingError(f"{CONFIG_ENV}={path}: {exc.strerror or exc}") from None
    props = Properties()
    try:
        props.load(data, "utf-8")
    except Exception as exc:
        raise UserFacingError(f"{CONFIG_ENV}={path} is not a properties file: {_one_line(exc)}") from None
    return {str(k).strip(): str(v.data).strip() for k, v in props.items()}


def parse_security(
    props: Mapping[str, str], *, username: str | None = None, password: str | None = None, source: str = ""
) -> KafkaSecurity:
    """Validate the properties and build the security settings. Every refusal is one line."""
    where = f" ({source})" if source else ""
    for key in props:
        if key not in KEYS:
            hint = _HINTS.get(key, f"supported: {', '.join(sorted(KEYS))}")
            raise UserFacingError(f"Kafka client setting {key!r}{where} is not supported; {hint}")
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise UserFacingError(
            f"security.protocol={protocol}{where} is not supported; use one of {', '.join(PROTOCOLS)}"
            + (" (SASL without TLS would send credentials in clear)" if protocol.startswith("SASL") else "")
        )
    tls_keys = [k for k in props if k.startswith("ssl.")]
    sasl_keys = [k for k in props if k.startswith("sasl.")]
    if protocol == "PLAINTEXT" and (tls_keys or sasl_keys or username or password):
        raise UserFacingError(
            f"security.protocol is PLAINTEXT{where} but TLS or SASL settings are given "
            f"({', '.join(tls_keys + sasl_keys) or USERNAME_ENV}); set security.protocol"
        )
    if protocol == "SSL" and (sasl_keys or username or password):
        raise UserFacingError(f"security.protocol is SSL{where} but SASL settings are given; use SASL_SSL")
    for type_key in ("ssl.truststore.type", "ssl.keystore.type"):
        kind = props.get(type_key, "PEM").upper()
        if kind != "PEM":
            raise UserFacingError(
                f"{type_key}={kind}{where} is not supported; use PEM files "
                "(a JKS or PKCS12 store converts with `keytool -exportcert -rfc` / `openssl pkcs12`)"
            )
    if "ssl.truststore.location" in props and "ssl.truststore.certificates" in props:
        raise UserFacingError(
            f"both ssl.truststore.location and ssl.truststore.certificates are set{where}; keep one"
        )
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", ""):
        raise UserFacingError(
            f"ssl.endpoint.identification.algorithm={algorithm!r}{where}: use https, or empty to disable"
        )
    mechanism = None
    if protocol == "SASL_SSL":
        mechanism = props.get("sasl.mechanism", "").upper()
        if mechanism not in MECHANISMS:
            raise UserFacingError(
                f"sasl.mechanism={mechanism or '(unset)'}{where} is not supported; use one of {', '.join(MECHANISMS)}"
            )
        jaas_user, jaas_password = _parse_jaas(props.get("sasl.jaas.config", ""), mechanism, where)
        username = username or jaas_user
        password = password or jaas_password
        if not username or not password:
            raise UserFacingError(
                f"SASL_SSL{where} needs a username and a password: sasl.jaas.config, or {USERNAME_ENV} "
                f"and {PASSWORD_ENV}"
            )
    return KafkaSecurity(
        protocol=protocol,
        mechanism=mechanism,
        username=username,
        password=password,
        ca_file=_existing(props.get("ssl.truststore.location"), "ssl.truststore.location", where),
        ca_pem=props.get("ssl.truststore.certificates") or None,
        check_hostname=algorithm == "https",
        keystore_file=_existing(props.get("ssl.keystore.location"), "ssl.keystore.location", where),
        key_password=props.get("ssl.key.password") or None,
    )


_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)\s+(?P<options>.*?);?\s*$",
    re.S,
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')


def _parse_jaas(text: str, mechanism: str, where: str) -> tuple[str | None, str | None]:
    """username and password from a `sasl.jaas.config` line, checking its login module."""
    if not text:
        return None, None
    match = _JAAS.match(text)
    if not match:
        raise UserFacingError(
            f'sasl.jaas.config{where} is not `<LoginModule> required username="…" password="…";`'
        )
    module = match["module"]
    if module != _LOGIN_MODULES[mechanism]:
        raise UserFacingError(
            f"sasl.jaas.config{where} uses {module.rsplit('.', 1)[-1]}, but sasl.mechanism={mechanism} "
            f"needs {_LOGIN_MODULES[mechanism].rsplit('.', 1)[-1]}"
        )
    options = {
        name: bare or re.sub(r"\\(.)", r"\1", quoted)
        for name, quoted, bare in _JAAS_OPTION.findall(match["options"])
    }
    return options.get("username") or None, options.get("password") or None


def _existing(path: str | None, key: str, where: str) -> str | None:
    if not path:
        return None
    if not Path(path).is_file():
        raise UserFacingError(f"{key}={path}{where}: no such file")
    return path


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def as_client(kafka: KafkaClient | str) -> KafkaClient:
    """A bare bootstrap string (development tools, tests) is a PLAINTEXT client."""
    return kafka if isinstance(kafka, KafkaClient) else KafkaClient.plaintext(kafka)
