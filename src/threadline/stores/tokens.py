"""The TokenBackend protocol: the HTTP service's bearer tokens, kept beside the log.

A token is an admin token, or bound to one user id. The database keeps a hash of each token's
secret, never the secret itself: :func:`issue` makes the secret, stores its hash and hands the
secret back once, to be shown to whoever created it. A token is found by the hash of the
secret a request presents. Revoking keeps the record (with when), so a listing still says what
it was; a revoked token never authenticates again. ``stores/tokens_conformance.py`` states this
contract as tests.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from threadline.errors import InputError, NotFound
from threadline.items import format_time, new_id

SECRET_PREFIX = "tl_"  # recognisable in a leaked config file or a secret scanner's rules


class TokenRole(StrEnum):
    ADMIN = "admin"  # everything, every user's
    USER = "user"    # one user's conversations and memory


class UnknownToken(NotFound):
    def __init__(self, token_id: str) -> None:
        super().__init__(f"no token with id {token_id!r}",
                         hint="list tokens with: threadline tokens list")


@dataclass(frozen=True)
class ApiToken:
    """A token as stored: everything but its secret."""

    id: str
    role: TokenRole
    user_id: str | None  # None exactly for admin tokens
    name: str | None
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "role": str(self.role), "user_id": self.user_id,
                "name": self.name, "created_at": format_time(self.created_at),
                "revoked_at": None if self.revoked_at is None else format_time(self.revoked_at)}


def secret_hash(secret: str) -> str:
    """What is stored for a secret, and what a presented secret is looked up by.

    Plain SHA-256, with no salt or key stretching, is enough because the secret is 256 random
    bits, not a password: there is nothing to guess from a hash and no dictionary to
    precompute, while a slow password hash would cost every request milliseconds. Lookups go
    through an index on the hash, so no comparison's timing depends on the secret."""
    return "sha256:" + hashlib.sha256(secret.encode("utf-8")).hexdigest()


class TokenBackend(Protocol):
    """Bearer tokens in the log's database. Every method either completes or changes
    nothing."""

    # lookups (find, any_active) are local reads that wait on no writer and no network: the
    # service's event loop makes them itself instead of handing each request to a thread
    in_place: bool

    def add(self, token: ApiToken, secret_hash: str) -> None:
        """Keep a new token under the hash of its secret."""
        ...

    def get(self, token_id: str) -> ApiToken:
        """UnknownToken unless there is such a token (revoked or not)."""
        ...

    def find(self, secret_hash: str) -> ApiToken | None:
        """The token whose secret has this hash, revoked or not; None for no such token."""
        ...

    def tokens(self) -> list[ApiToken]:
        """Every token, revoked ones included, oldest first (by created_at, id)."""
        ...

    def revoke(self, token_id: str, at: datetime) -> ApiToken:
        """Revoke a token at ``at`` (a token revoked before keeps its first time); the token
        as it is now. UnknownToken if there is no such token."""
        ...

    def any_active(self) -> bool:
        """Whether any token is not revoked."""
        ...


def issue(backend: TokenBackend, *, role: TokenRole, user_id: str | None, name: str | None,
          at: datetime) -> tuple[ApiToken, str]:
    """Create a token: its record, and its secret (which nothing keeps: show it now)."""
    if role is TokenRole.ADMIN and user_id is not None:
        raise InputError("an admin token is not bound to a user",
                         hint="create either an admin token or one for --user ID")
    if role is TokenRole.USER:
        if user_id is None:
            raise InputError("a user token needs the user id it is bound to",
                             hint="pass --user ID (or --admin for an admin token)")
        if not user_id or user_id != user_id.strip() or len(user_id) > 200:
            raise InputError(f"invalid user id {user_id!r}: use 1-200 characters, no "
                             "surrounding spaces", hint="use the id your application has "
                                                       "for the user, e.g. --user ann")
    if name is not None and (not name.strip() or len(name) > 100 or not name.isprintable()):
        raise InputError(f"invalid token name {name!r}: use 1-100 printable characters",
                         hint="a name says what the token is for, e.g. 'ci' or 'ann laptop'")
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)  # 256 bits from the OS's CSPRNG
    token = ApiToken(new_id("tok_"), role, user_id, name, at)
    backend.add(token, secret_hash(secret))
    return token, secret
