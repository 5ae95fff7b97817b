"""A local certificate authority for the local stack: made once, then issues leaf certificates.

`ensure_ca(dir)` writes `ca.pem` and `ca.key` (0600) the first time and reuses them while they are
valid. `issue(ca, dir, name)` writes `<name>.pem` (the leaf), `<name>.key` (PKCS#8 PEM, encrypted
when given a password), `<name>-chain.pem` (leaf then CA) and `<name>-keystore.pem` (key then
chain: what Kafka's `ssl.keystore.type=PEM` file holds). A leaf is reissued when a file is missing,
when it expires within 7 days, when its CA, names or usages differ from what is asked, or when its
key no longer matches it or does not open with the password given. Keys are ECDSA P-256.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 365
RENEW_WITHIN = dt.timedelta(days=7)
_BACKDATE = dt.timedelta(minutes=5)  # tolerate a little clock skew between the processes


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path
    chain: Path  # the leaf followed by the CA (for the CA itself: ca.pem)

    @property
    def keystore(self) -> Path:
        """<name>-keystore.pem: the private key, then the chain (a leaf's; the CA has none)."""
        return self.cert.with_name(f"{self.cert.stem}-keystore.pem")


def ensure_ca(directory: Path, name: str = "incident-memory local CA") -> Issued:
    """The CA in `directory` (ca.pem, ca.key), created if missing, expiring within 7 days, or broken."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = Issued(cert=directory / "ca.pem", key=directory / "ca.key", chain=directory / "ca.pem")
    if _ca_ok(ca):
        return ca
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(digital_signature=True, key_cert_sign=True, crl_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(ca.key, _key_pem(key, None), private=True)
    _write(ca.cert, cert.public_bytes(serialization.Encoding.PEM))
    return ca


def issue(
    ca: Issued,
    directory: Path,
    name: str,
    *,
    hosts: Sequence[str] = ("127.0.0.1", "localhost"),
    client: bool = False,
    key_password: str | None = None,
) -> Issued:
    """A leaf certificate for `name` (CN) valid for `hosts`, signed by `ca`; reused while it fits."""
    directory.mkdir(parents=True, exist_ok=True)
    leaf = Issued(
        cert=directory / f"{name}.pem", key=directory / f"{name}.key", chain=directory / f"{name}-chain.pem"
    )
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    sans = _sans(hosts)
    usages = _ekus(client)
    if _leaf_ok(leaf, ca_cert, name, sans, usages, key_password):
        return leaf
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{ca.key}: not an EC key made by ensure_ca")
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(min(now + dt.timedelta(days=LEAF_DAYS), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    chain_pem = cert_pem + ca.cert.read_bytes()
    key_pem = _key_pem(key, key_password)
    _write(leaf.key, key_pem, private=True)
    _write(leaf.keystore, key_pem + chain_pem, private=True)
    _write(leaf.chain, chain_pem)
    _write(leaf.cert, cert_pem)  # last: its presence with the others marks a complete issue
    return leaf


# ------------------------------------------------------------------ checks


def _ca_ok(ca: Issued) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
        key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except (OSError, ValueError, TypeError, x509.ExtensionNotFound):
        return False
    return constraints.ca and _fresh(cert) and _same_key(cert, key)


def _leaf_ok(
    leaf: Issued,
    ca_cert: x509.Certificate,
    name: str,
    sans: list[x509.GeneralName],
    usages: list[x509.ObjectIdentifier],
    key_password: str | None,
) -> bool:
    if not all(p.is_file() for p in (leaf.cert, leaf.key, leaf.chain, leaf.keystore)):
        return False
    try:
        cert = x509.load_pem_x509_certificate(leaf.cert.read_bytes())
        cert.verify_directly_issued_by(ca_cert)
        key = serialization.load_pem_private_key(
            leaf.key.read_bytes(), password=key_password.encode() if key_password else None
        )
        got_sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        got_ekus = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        common_names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    except Exception:  # unreadable, foreign, or a password that does not open it: reissue
        return False
    return (
        _fresh(cert)
        and _same_key(cert, key)
        and [a.value for a in common_names] == [name]
        and set(got_sans) == set(sans)
        and set(got_ekus) == set(usages)
    )


def _fresh(cert: x509.Certificate) -> bool:
    now = _now()
    return cert.not_valid_before_utc <= now and cert.not_valid_after_utc - now > RENEW_WITHIN


def _same_key(cert: x509.Certificate, key: object) -> bool:
    public = getattr(key, "public_key", None)
    if public is None:
        return False
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return bool(public().public_bytes(*fmt) == cert.public_key().public_bytes(*fmt))


# ------------------------------------------------------------------ helpers


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _sans(hosts: Sequence[str]) -> list[x509.GeneralName]:
    if not hosts:
        raise ValueError("a leaf certificate needs at least one host")
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _ekus(client: bool) -> list[x509.ObjectIdentifier]:
    return [ExtendedKeyUsageOID.SERVER_AUTH, *([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])]


def _usage(
    *, digital_signature: bool = False, key_cert_sign: bool = False, crl_sign: bool = False
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None) -> bytes:
    """PKCS#8 PEM; with a password, encrypted by `cryptography`'s best available scheme (PBES2).

    OpenSSL-based clients (librdkafka, libpq, Python's ssl) open it. Java 17's PEM reader in Kafka
    does not (no "PBES2" SecretKeyFactory), so the local broker's own key is unencrypted, 0600."""
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _pem(label: str, der: bytes) -> bytes:
    text = base64.b64encode(der).decode()
    lines = [text[i : i + 64] for i in range(0, len(text), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----", ""]).encode()


def _write(path: Path, data: bytes, *, private: bool = False) -> None:
    """Atomically, with the final mode from the start (0600 for anything holding a key)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o600 if private else 0o644)  # the umask may have narrowed the public ones
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
