"""Certificates for a secured lab, its tests and bench/security.py (DESIGN §19): a throwaway CA, a broker
certificate valid for localhost and 127.0.0.1 (and any other names given), and a client certificate, made with the
openssl command line tool (EC P-256 keys, valid two days). The broker's key store is one PEM file holding its
certificate and key (`ssl.keystore.location`, KIP-651); the CA's certificate is everyone's trust store."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CLIENT_DN = "CN=client,O=zkbroker"  # the principal a client certificate gives: User:CN=client,O=zkbroker


@dataclass(frozen=True)
class Certificates:
    dir: Path
    ca: Path  # the CA certificate (the trust store)
    broker: Path  # the broker's certificate chain and key, one PEM file (ssl.keystore.location)
    client_cert: Path
    client_key: Path
    client_dn: str = CLIENT_DN


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {done.stderr.strip()}")


def make_certificates(directory: Path, hosts: Sequence[str] = ("localhost", "127.0.0.1"),
                      days: int = 2) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", str(days),
             "-subj", "/CN=zkbroker lab CA", cwd=directory)
    names = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}" for h in hosts)
    (directory / "broker.ext").write_text(f"subjectAltName={names}\n")
    (directory / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subject in (("broker", "/CN=localhost"), ("client", "/O=zkbroker/CN=client")):
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=directory)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", str(days), "-extfile", f"{name}.ext", cwd=directory)
    keystore = directory / "broker.pem"
    keystore.write_text((directory / "broker.crt").read_text() + (directory / "broker.key").read_text())
    keystore.chmod(0o600)
    return Certificates(directory, directory / "ca.pem", keystore, directory / "client.crt", directory / "client.key")
