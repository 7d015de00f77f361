"""Authentication of the Airflow stand-in: Airflow 3's JWTs (`POST /auth/token`) and Airflow 2's
HTTP basic auth.

Tokens are real HS512 JWTs (sub, role, iat, nbf, exp, jti) signed with a per-stand-in secret,
valid 24 h of the stand-in's clock like Airflow's default `[api_auth] jwt_expiration_time`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Literal

TOKEN_LIFETIME = timedelta(hours=24)
AUDIENCE = "apache-airflow"
TokenProblem = Literal["missing", "invalid", "expired"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Tokens:
    """Issues and checks JWTs; tests may expire or revoke every token issued so far."""

    def __init__(self, clock: Callable[[], datetime], lifetime: timedelta = TOKEN_LIFETIME) -> None:
        self._clock = clock
        self._secret = secrets.token_bytes(32)
        self.lifetime = lifetime
        self._expired: set[str] = set()
        self._revoked: set[str] = set()
        self._issued: set[str] = set()

    def issue(self, username: str) -> str:
        now = int(self._clock().timestamp())
        jti = secrets.token_hex(16)
        claims = {
            "sub": username,
            "role": "ADMIN",
            "aud": AUDIENCE,
            "iat": now,
            "nbf": now,
            "exp": now + int(self.lifetime.total_seconds()),
            "jti": jti,
        }
        header = _b64(json.dumps({"alg": "HS512", "typ": "JWT"}).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = _b64(self._sign(f"{header}.{payload}"))
        self._issued.add(jti)
        return f"{header}.{payload}.{signature}"

    def _sign(self, text: str) -> bytes:
        return hmac.new(self._secret, text.encode("ascii"), hashlib.sha512).digest()

    def check(self, token: str | None) -> TokenProblem | None:
        """None when `token` is a valid, unexpired token of this stand-in."""
        if not token:
            return "missing"
        try:
            header, payload, signature = token.split(".")
            expected = self._sign(f"{header}.{payload}")
            if not hmac.compare_digest(expected, _unb64(signature)):
                return "invalid"
            claims = json.loads(_unb64(payload))
        except (ValueError, binascii.Error, UnicodeError):
            return "invalid"
        jti = claims.get("jti") if isinstance(claims, dict) else None
        if not isinstance(jti, str) or jti in self._revoked:
            return "invalid"
        if jti in self._expired or claims.get("exp", 0) <= self._clock().timestamp():
            return "expired"
        return None

    def expire_all(self) -> None:
        self._expired |= self._issued

    def revoke_all(self) -> None:
        self._revoked |= self._issued


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """(username, password) from an `Authorization: Basic ...` header, or None."""
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (ValueError, binascii.Error, UnicodeError):
        return None
    username, sep, password = decoded.partition(":")
    return (username, password) if sep else None


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
