"""deploy/local/tls.py: a local CA made once, leaves with the right names and usages, reused until unfit."""

from __future__ import annotations

import datetime as dt
import ipaddress
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from deploy.local import tls


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _sans(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}, set(
        san.get_values_for_type(x509.DNSName)
    )


def _ekus(cert: x509.Certificate) -> set[x509.ObjectIdentifier]:
    return set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def _verify(ca: tls.Issued, leaf: tls.Issued, host: str) -> None:
    """cryptography's own path validation (RFC 5280 + CA/B server profile) for `host`."""
    name: x509.GeneralName
    try:
        name = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        name = x509.DNSName(host)
    verifier = PolicyBuilder().store(Store([_cert(ca.cert)])).build_server_verifier(name)
    verifier.verify(_cert(leaf.cert), [])


def test_ca_is_made_once_with_a_private_key_and_reused(tmp_path: Path) -> None:
    ca = tls.ensure_ca(tmp_path / "tls")
    assert (ca.cert, ca.key, ca.chain) == (
        tmp_path / "tls/ca.pem",
        tmp_path / "tls/ca.key",
        tmp_path / "tls/ca.pem",
    )
    assert stat.S_IMODE(ca.key.stat().st_mode) == 0o600
    cert = _cert(ca.cert)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.subject == cert.issuer
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "incident-memory local CA"
    before = (ca.cert.read_bytes(), ca.key.read_bytes())
    assert tls.ensure_ca(tmp_path / "tls") == ca
    assert (ca.cert.read_bytes(), ca.key.read_bytes()) == before  # reused, not remade


def test_a_broken_ca_is_remade(tmp_path: Path) -> None:
    ca = tls.ensure_ca(tmp_path)
    first = _cert(ca.cert).serial_number
    ca.key.write_bytes(tls.ensure_ca(tmp_path / "other").key.read_bytes())  # a key that is not the cert's
    assert _cert(tls.ensure_ca(tmp_path).cert).serial_number != first


def test_leaf_names_usages_and_files(tmp_path: Path) -> None:
    ca = tls.ensure_ca(tmp_path / "ca")
    leaf = tls.issue(
        ca, tmp_path / "certs", "db", hosts=("127.0.0.1", "localhost", "::1", "db.example.internal")
    )
    assert leaf == tls.Issued(
        tmp_path / "certs/db.pem", tmp_path / "certs/db.key", tmp_path / "certs/db-chain.pem"
    )
    cert = _cert(leaf.cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "db"
    assert _sans(cert) == ({"127.0.0.1", "::1"}, {"localhost", "db.example.internal"})
    assert _ekus(cert) == {ExtendedKeyUsageOID.SERVER_AUTH}
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert cert.issuer == _cert(ca.cert).subject
    # PKCS#8, unencrypted, private; the chain is leaf then CA; the keystore is key then chain
    key_pem = leaf.key.read_bytes()
    assert key_pem.startswith(b"-----BEGIN PRIVATE KEY-----\n")
    assert leaf.chain.read_bytes() == leaf.cert.read_bytes() + ca.cert.read_bytes()
    assert leaf.keystore == tmp_path / "certs/db-keystore.pem"
    assert leaf.keystore.read_bytes() == key_pem + leaf.chain.read_bytes()
    for private in (leaf.key, leaf.keystore):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
    key = serialization.load_pem_private_key(key_pem, password=None)
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert key.public_key().public_bytes(*fmt) == cert.public_key().public_bytes(*fmt)


def test_client_flag_adds_client_auth(tmp_path: Path) -> None:
    ca = tls.ensure_ca(tmp_path)
    cert = _cert(tls.issue(ca, tmp_path, "ingest", client=True).cert)
    assert _ekus(cert) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}


def test_chain_verifies_with_its_ca_only_and_for_its_hosts_only(tmp_path: Path) -> None:
    ca = tls.ensure_ca(tmp_path / "ca")
    leaf = tls.issue(ca, tmp_path, "broker")
    _verify(ca, leaf, "127.0.0.1")
    _verify(ca, leaf, "localhost")
    with pytest.raises(VerificationError):
        _verify(ca, leaf, "elsewhere.example")
    with pytest.raises(VerificationError):
        _verify(ca, leaf, "127.0.0.2")
    other = tls.ensure_ca(tmp_path / "other")
    with pytest.raises(VerificationError):
        _verify(other, leaf, "127.0.0.1")
    openssl = shutil.which("openssl")
    if openssl:  # the same with OpenSSL, which libpq and librdkafka use
        good = subprocess.run([openssl, "verify", "-CAfile", str(ca.cert), "-verify_ip", "127.0.0.1",
                               "-purpose", "sslserver", str(leaf.cert)], capture_output=True, text=True)  # fmt: skip
        assert good.returncode == 0 and ": OK" in good.stdout, good.stdout + good.stderr
        bad = subprocess.run([openssl, "verify", "-CAfile", str(other.cert), str(leaf.cert)],
                             capture_output=True, text=True)  # fmt: skip
        assert bad.returncode != 0


def test_leaf_is_reused_while_it_fits(tmp_path: Path) -> None:
    ca = tls.ensure_ca(tmp_path / "ca")
    first = tls.issue(ca, tmp_path, "pg")
    files = {p: p.read_bytes() for p in (first.cert, first.key, first.chain, first.keystore)}
    again = tls.issue(ca, tmp_path, "pg")
    assert again == first
    assert {p: p.read_bytes() for p in files} == files


def _serial(leaf: tls.Issued) -> int:
    return _cert(leaf.cert).serial_number


def test_leaf_is_reissued_when_a_file_is_missing(tmp_path: Path) -> None:
    ca = tls.ensure_ca(tmp_path / "ca")
    first = _serial(tls.issue(ca, tmp_path, "pg"))
    (tmp_path / "pg-keystore.pem").unlink()
    leaf = tls.issue(ca, tmp_path, "pg")
    assert _serial(leaf) != first and leaf.keystore.is_file()


def test_leaf_is_reissued_when_it_expires_within_seven_days(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = tls.ensure_ca(tmp_path / "ca")
    with monkeypatch.context() as m:
        m.setattr(tls, "LEAF_DAYS", 6)
        short = tls.issue(ca, tmp_path, "pg")
        soon = _cert(short.cert).not_valid_after_utc
        assert soon - dt.datetime.now(dt.UTC) < dt.timedelta(days=7)
    renewed = tls.issue(ca, tmp_path, "pg")
    assert _cert(renewed.cert).not_valid_after_utc - dt.datetime.now(dt.UTC) > dt.timedelta(days=300)
    with monkeypatch.context() as m:  # 8 days left: still fine
        m.setattr(tls, "LEAF_DAYS", 8)
        (tmp_path / "pg.pem").unlink()
        eight = _serial(tls.issue(ca, tmp_path, "pg"))
    assert _serial(tls.issue(ca, tmp_path, "pg")) == eight


def test_leaf_is_reissued_for_another_ca_other_hosts_or_usages(tmp_path: Path) -> None:
    ca = tls.ensure_ca(tmp_path / "ca")
    tls.issue(ca, tmp_path, "kafka")
    other = tls.ensure_ca(tmp_path / "other")  # a throwaway CA with the same name: only the key differs
    assert _cert(other.cert).subject == _cert(ca.cert).subject
    moved = tls.issue(other, tmp_path, "kafka")
    _verify(other, moved, "127.0.0.1")
    with pytest.raises(VerificationError):
        _verify(ca, moved, "127.0.0.1")
    assert moved.chain.read_bytes().endswith(other.cert.read_bytes())
    serial = _serial(moved)  # the same paths each time: read the serial before the next issue
    narrowed = tls.issue(other, tmp_path, "kafka", hosts=("127.0.0.1",))  # other hosts
    assert _serial(narrowed) != serial
    assert _sans(_cert(narrowed.cert)) == ({"127.0.0.1"}, set())
    serial = _serial(narrowed)
    widened = tls.issue(other, tmp_path, "kafka", hosts=("127.0.0.1",), client=True)  # other usages
    assert _serial(widened) != serial


def test_encrypted_key_opens_with_its_password_only_and_a_new_password_reissues(tmp_path: Path) -> None:
    ca = tls.ensure_ca(tmp_path / "ca")
    leaf = tls.issue(ca, tmp_path, "broker", client=True, key_password="k3y-pass")
    pem = leaf.key.read_bytes()
    assert pem.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----\n")
    assert leaf.keystore.read_bytes() == pem + leaf.chain.read_bytes()
    key = serialization.load_pem_private_key(pem, password=b"k3y-pass")
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert key.public_key().public_bytes(*fmt) == _cert(leaf.cert).public_key().public_bytes(*fmt)
    with pytest.raises(ValueError):
        serialization.load_pem_private_key(pem, password=b"wrong")
    with pytest.raises(TypeError):  # encrypted: no password, no key
        serialization.load_pem_private_key(pem, password=None)
    serial = _serial(leaf)
    assert _serial(tls.issue(ca, tmp_path, "broker", client=True, key_password="k3y-pass")) == serial
    rekeyed = tls.issue(ca, tmp_path, "broker", client=True, key_password="another")
    assert _serial(rekeyed) != serial
    serialization.load_pem_private_key(rekeyed.key.read_bytes(), password=b"another")
