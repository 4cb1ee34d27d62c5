"""The TokenBackend contract, as tests any store that keeps tokens runs.

Mix :class:`TokenConformance` into a store's conformance test class (it uses the same
``make_store`` fixture as :class:`~threadline.stores.conformance.StoreConformance`)::

    class TestMyStore(StoreConformance, TokenConformance):
        ...
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from threadline.errors import InputError
from threadline.stores.base import Store
from threadline.stores.conformance import MakeStore, OpensStore
from threadline.stores.tokens import (
    SECRET_PREFIX,
    ApiToken,
    TokenBackend,
    TokenRole,
    UnknownToken,
    issue,
    secret_hash,
)

_T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
_HOUR = timedelta(hours=1)


def _user(backend: TokenBackend, user_id: str, *, at: datetime = _T0,
          name: str | None = None) -> tuple[ApiToken, str]:
    return issue(backend, role=TokenRole.USER, user_id=user_id, name=name, at=at)


class TokenConformance(OpensStore):
    """The behaviour every store that keeps tokens must show."""

    @pytest.fixture
    def tokens(self, store: Store) -> TokenBackend:
        backend = store.tokens
        assert backend is not None, "this store keeps no tokens: leave TokenConformance out"
        return backend

    def test_a_token_is_found_by_its_secret_only(self, tokens: TokenBackend) -> None:
        admin, admin_secret = issue(tokens, role=TokenRole.ADMIN, user_id=None, name="ops",
                                    at=_T0)
        ann, ann_secret = _user(tokens, "ann", at=_T0 + _HOUR, name="ann laptop")
        assert tokens.find(secret_hash(admin_secret)) == admin
        assert tokens.find(secret_hash(ann_secret)) == ann
        assert (ann.role, ann.user_id, ann.name, ann.created_at, ann.revoked_at) == (
            TokenRole.USER, "ann", "ann laptop", _T0 + _HOUR, None)
        assert (admin.role, admin.user_id) == (TokenRole.ADMIN, None)
        assert tokens.get(ann.id) == ann
        for wrong in (ann_secret + "x", ann_secret[:-1], ann_secret.upper(), "", ann.id,
                      secret_hash(ann_secret)):  # the stored hash is no secret to present
            assert tokens.find(secret_hash(wrong)) is None
        assert tokens.tokens() == [admin, ann]

    def test_secrets_are_long_random_and_never_kept(self, tokens: TokenBackend) -> None:
        issued = [_user(tokens, "ann") for _ in range(20)]
        secrets = {secret for _, secret in issued}
        assert len(secrets) == 20
        assert all(s.startswith(SECRET_PREFIX) and len(s) >= len(SECRET_PREFIX) + 43
                   for s in secrets)  # 43 base64 characters: 256 bits
        kept = repr(tokens.tokens())
        assert not any(secret in kept for secret in secrets)

    def test_revoking_is_immediate_and_kept(self, make_store: MakeStore) -> None:
        one, other = make_store(), make_store()  # two replicas on one database
        try:
            backend, replica = one.tokens, other.tokens
            assert backend is not None and replica is not None
            assert not replica.any_active()
            ann, secret = _user(backend, "ann")
            bob, _ = _user(backend, "bob")
            assert replica.any_active()
            revoked = backend.revoke(ann.id, _T0 + _HOUR)
            assert revoked.revoked_at == _T0 + _HOUR and not revoked.active
            found = replica.find(secret_hash(secret))
            assert found is not None and not found.active  # the other replica sees it now
            assert replica.revoke(ann.id, _T0 + 2 * _HOUR) == revoked  # the first time stays
            assert replica.any_active()
            replica.revoke(bob.id, _T0)
            assert not backend.any_active()
            assert [t.active for t in backend.tokens()] == [False, False]  # kept, as revoked
        finally:
            one.close()
            other.close()

    def test_an_unknown_token_changes_nothing(self, tokens: TokenBackend) -> None:
        ann, _ = _user(tokens, "ann")
        for unknown in ("tok_missing", ann.id.upper(), ann.id + " ", ""):
            with pytest.raises(UnknownToken, match="no token with id"):
                tokens.revoke(unknown, _T0)
            with pytest.raises(UnknownToken):
                tokens.get(unknown)
        assert tokens.tokens() == [ann]

    def test_a_token_is_admin_or_one_users(self, tokens: TokenBackend) -> None:
        for role, user_id, name, message in [
                (TokenRole.ADMIN, "ann", None, "not bound to a user"),
                (TokenRole.USER, None, None, "needs the user id"),
                (TokenRole.USER, "", None, "invalid user id"),
                (TokenRole.USER, " ann", None, "invalid user id"),
                (TokenRole.USER, "a" * 201, None, "invalid user id"),
                (TokenRole.USER, "ann", "", "invalid token name"),
                (TokenRole.USER, "ann", "two\nlines", "invalid token name")]:
            with pytest.raises(InputError, match=message):
                issue(tokens, role=role, user_id=user_id, name=name, at=_T0)
        assert tokens.tokens() == []
        assert not tokens.any_active()
