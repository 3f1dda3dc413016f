"""The key that signs workload identities (``identity`` blocks, Nomad 1.7's), and its public key set.

An RSA key (RS256, as Nomad signs workload identities by default: every OIDC verifier takes it),
made the first time one is needed and kept in ``<data_dir>/identity.key`` (PKCS #8 PEM, 0600, the
agent's user's alone), as the agent's token is kept (:mod:`herder.agent.credential`): later starts
sign with the same key, so tokens handed out before still verify. Its public half is served as a
JSON Web Key Set (``/.well-known/jwks.json``); a key's ``kid`` is its RFC 7638 thumbprint.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from herder.client.taskdir import make_data_dir
from herder.errors import HerderError
from herder.sdk.safefs import UnsafePathError, open_file, publish_once, read_file, safe_root

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

# PyJWT and cryptography are imported where a key is first made, read or used: every herder process
# imports this module, and only those that hand out identities need them (a tenth of a second of start).

log = logging.getLogger(__name__)

KEY_FILE = "identity.key"
ALGORITHM = "RS256"
KEY_BITS = 2048
MAX_KEY_FILE = 16 * 1024
"""A PEM of a 2048-bit key is under 2 KiB: a larger file is not one herder made."""
RETRY_AFTER = 10.0
"""Seconds a key that could not be made or read is not tried again: the key set is served without the
token, and each try may make a key (tens of milliseconds of CPU) that the data dir cannot take."""


class SigningKeyError(HerderError):
    """The data dir's signing key cannot be made or is not one to trust (the message says why)."""


@dataclass(frozen=True)
class WorkloadClaims:
    """Who a workload identity names, in Nomad's claims."""

    namespace: str
    job_id: str
    alloc_id: str
    task: str
    subject: str
    audience: tuple[str, ...]


class IdentitySigner:
    """Signs workload identity tokens with the key of ``data_dir``, made on first use."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._lock = threading.Lock()
        self._key: rsa.RSAPrivateKey | None = None
        self._failed: tuple[float, str] | None = None  # until when the last failure stands, and why

    def _private(self) -> rsa.RSAPrivateKey:
        with self._lock:
            if self._key is None:
                if self._failed is not None and time.monotonic() < self._failed[0]:
                    raise SigningKeyError(self._failed[1])
                try:
                    self._key = _load_or_make(self.data_dir)
                except SigningKeyError as exc:
                    self._failed = time.monotonic() + RETRY_AFTER, str(exc)
                    raise
            return self._key

    def key_id(self) -> str:
        return _thumbprint(self._public_jwk())

    def sign(self, claims: WorkloadClaims, ttl: float = 0.0, now: float | None = None) -> str:
        """A JWT of ``claims`` (Nomad 1.7's: ``nomad_*``, ``sub``, ``aud``, ``iat``, ``nbf``, ``jti``, and
        ``exp`` when ``ttl`` is set), signed with the key."""
        issued = int(time.time() if now is None else now)
        payload: dict[str, Any] = {
            "nomad_namespace": claims.namespace, "nomad_job_id": claims.job_id,
            "nomad_allocation_id": claims.alloc_id, "nomad_task": claims.task, "sub": claims.subject,
            "iat": issued, "nbf": issued, "jti": str(uuid.uuid4()),
        }
        if claims.audience:  # one audience is a string, as go-jose writes it
            payload["aud"] = claims.audience[0] if len(claims.audience) == 1 else list(claims.audience)
        if ttl > 0:
            payload["exp"] = issued + int(ttl)
        import jwt

        return jwt.encode(payload, self._private(), algorithm=ALGORITHM, headers={"kid": self.key_id()})

    def jwks(self) -> dict[str, list[dict[str, str]]]:
        """The public key set, as Nomad's ``/.well-known/jwks.json`` answers it."""
        public = self._public_jwk()
        return {"keys": [{**public, "kid": _thumbprint(public), "use": "sig", "alg": ALGORITHM}]}

    def _public_jwk(self) -> dict[str, str]:
        numbers = self._private().public_key().public_numbers()
        return {"kty": "RSA", "n": _b64_uint(numbers.n), "e": _b64_uint(numbers.e)}


def _b64_uint(value: int) -> str:
    raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _thumbprint(jwk: Mapping[str, str]) -> str:
    """RFC 7638: the SHA-256 of the key's required members, sorted, without white space."""
    required = json.dumps({key: jwk[key] for key in ("e", "kty", "n")}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(required.encode()).digest()).rstrip(b"=").decode("ascii")


def _load_or_make(data_dir: Path) -> rsa.RSAPrivateKey:
    """The key in ``data_dir``, made first if there is none (written to a temporary name, 0600, and linked
    into place, so a reader never sees a part of it).

    :raises SigningKeyError: the file is a link, another's, open to others, or holds no RSA key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    where = data_dir / KEY_FILE
    try:
        make_data_dir(data_dir)
        with safe_root(data_dir) as fd:
            try:
                return _read(fd)
            except FileNotFoundError:
                pass
            key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
            pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
            if not publish_once(fd, KEY_FILE, pem):
                return _read(fd)  # another start made one meanwhile
    except UnsafePathError as exc:
        raise SigningKeyError(f"{where}: {exc.reason}") from None
    except OSError as exc:
        raise SigningKeyError(f"{where}: {exc.strerror or exc}") from None
    log.info("made the key that signs workload identities: %s", where)
    return key


def _read(dir_fd: int) -> rsa.RSAPrivateKey:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    fd = open_file(dir_fd, KEY_FILE)
    try:
        status = os.fstat(fd)
    finally:
        os.close(fd)
    if status.st_uid != os.geteuid() or status.st_mode & 0o077:
        raise SigningKeyError(f"{KEY_FILE}: must be this user's alone (uid {os.geteuid()}, mode 0600); remove it, "
                              "and herder makes a new key (tokens signed with the old one no longer verify)")
    try:
        key = serialization.load_pem_private_key(read_file(dir_fd, KEY_FILE, limit=MAX_KEY_FILE), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):  # over the limit, no PEM key, under a passphrase
        key = None
    # A shorter key than herder makes would sign tokens that whoever factors it could forge.
    if not isinstance(key, rsa.RSAPrivateKey) or key.key_size < KEY_BITS:
        raise SigningKeyError(f"{KEY_FILE}: holds no RSA private key of {KEY_BITS} bits or more (unencrypted); "
                              "remove it, and herder makes a new one")
    return key
