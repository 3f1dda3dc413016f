"""A throwaway certificate authority for TLS tests, made with the ``openssl``
command line: no Python dependency beyond the standard library."""

from __future__ import annotations

import secrets
import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.require import require

SERVER_EXTENSIONS = """\
subjectAltName = IP:127.0.0.1, DNS:localhost
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
"""


@dataclass(frozen=True)
class Certificates:
    """A CA, and a server certificate it signed for 127.0.0.1 and localhost."""

    ca: Path
    """The CA's certificate: what a client trusts."""
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        """A client's TLS context that trusts this CA only."""
        return ssl.create_default_context(cafile=self.ca)


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    require("openssl", openssl is not None, "no openssl on PATH")
    assert openssl is not None
    subprocess.run([openssl, *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(directory: Path) -> Certificates:
    """A new CA and server certificate (P-256 keys, valid for a day) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    key_options = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    _openssl("req", "-x509", *key_options, "-days", "1", "-subj", "/CN=herder test CA", "-keyout", "ca.key",
             "-out", "ca.pem", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    _openssl("req", "-new", *key_options, "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr",
             cwd=directory)
    (directory / "server.ext").write_text(SERVER_EXTENSIONS)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-days", "1",
             "-set_serial", str(secrets.randbits(63)), "-extfile", "server.ext", "-out", "server.pem", cwd=directory)
    return Certificates(ca=directory / "ca.pem", cert=directory / "server.pem", key=directory / "server.key")
