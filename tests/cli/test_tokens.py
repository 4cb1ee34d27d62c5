"""``threadline tokens create|list|revoke`` and ``threadline serve``'s refusal to listen
beyond this machine without them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.cli.conftest import Invoke, snapshot
from threadline.cli.serve import is_loopback
from threadline.engine import Engine
from threadline.models.scripted import ScriptedModel
from threadline.server.app import create_app
from threadline.stores.sqlite import SQLiteStore


def _status(home: Path, secret: str | None) -> int:
    """What the service over this data directory answers a listing with this secret."""
    store = SQLiteStore(home / "threadline.db")
    try:
        client = TestClient(create_app(Engine(store, ScriptedModel())))
        headers = {} if secret is None else {"Authorization": f"Bearer {secret}"}
        return client.get("/v1/conversations", headers=headers).status_code
    finally:
        store.close()


def test_a_token_is_created_listed_used_and_revoked(tl: Invoke, home: Path) -> None:
    made = tl("tokens", "create", "--user", "ann", "--name", "ann laptop")
    assert made.code == 0, made.err
    secret = made.out.strip()
    assert secret.startswith("tl_") and "\n" not in secret  # alone on stdout, for scripts
    assert "only time the secret is shown" in made.err and "user ann" in made.err
    admin = tl("tokens", "create", "--admin", "--json").json()
    assert (admin["role"], admin["user_id"], admin["revoked_at"]) == ("admin", None, None)
    assert admin["secret"].startswith("tl_") and admin["secret"] != secret
    listed = tl("tokens", "list", "--json")
    assert [(t["role"], t["user_id"], t["name"]) for t in listed.json()] == [
        ("user", "ann", "ann laptop"), ("admin", None, None)]
    human = tl("tokens", "list").out
    assert "ann laptop" in human and "active" in human
    for shown in (listed.out, human):  # a listing never shows a secret
        assert secret not in shown and admin["secret"] not in shown and "secret" not in shown
    assert _status(home, secret) == 200 and _status(home, None) == 401
    ann = listed.json()[0]["id"]
    revoked = tl("tokens", "revoke", ann, "--yes")
    assert revoked.code == 0 and revoked.out.strip() == (
        f"revoked token for user ann {ann} (ann laptop)")
    assert _status(home, secret) == 401  # the next request is refused
    assert _status(home, admin["secret"]) == 200
    again = tl("tokens", "revoke", ann, "--json").json()  # nothing left to confirm
    assert again["revoked_at"] == tl("tokens", "list", "--json").json()[0]["revoked_at"]
    assert "revoked 20" in tl("tokens", "list").out


def test_no_tokens_says_how_to_make_one(tl: Invoke) -> None:
    assert tl("tokens", "list", "--json").json() == []
    assert "threadline tokens create --admin" in tl("tokens", "list").out


@pytest.mark.parametrize(("args", "code", "message"), [
    (("tokens", "revoke", "tok_missing", "--yes"), 3, "no token with id 'tok_missing'"),
    (("tokens", "revoke", "tok_missing"), 3, "no token with id"),
    (("tokens", "revoke", "{ann}"), 2, "refusing to revoke token for user ann"),
    (("tokens", "create"), 2, "exactly one of --admin and --user"),
    (("tokens", "create", "--admin", "--user", "ann"), 2, "exactly one of --admin and --user"),
    (("tokens", "create", "--user", " ann"), 2, "invalid user id"),
    (("tokens", "create", "--user", ""), 2, "invalid user id"),
    (("tokens", "create", "--admin", "--name", ""), 2, "invalid token name"),
])
def test_bad_token_input_is_refused_and_changes_nothing(
        tl: Invoke, home: Path, args: tuple[str, ...], code: int, message: str) -> None:
    ann = tl("tokens", "create", "--user", "ann", "--json").json()
    before = snapshot(home)
    refused = tl(*(a.format(ann=ann["id"]) for a in args))
    assert refused.code == code, (refused.out, refused.err)
    assert message in refused.err and "hint:" in refused.err
    assert refused.out == "" and snapshot(home) == before
    assert _status(home, ann["secret"]) == 200


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost",
                                  "LocalHost"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "example.com",
                                  "localhost.example.com", ""])
def test_other_hosts(host: str) -> None:
    assert not is_loopback(host)


def _serve(monkeypatch: pytest.MonkeyPatch, home: Path,
           secret: str | None = None) -> dict[str, Any]:
    """Where serve would listen, and what its app answers a listing (without a token, with
    ``secret``, and with ``secret`` once every token is revoked), asked while it serves."""
    started: dict[str, Any] = {}

    def run(app: Any, **where: Any) -> None:
        client = TestClient(app)
        answers = [client.get("/v1/conversations").status_code]
        if secret is not None:
            headers = {"Authorization": f"Bearer {secret}"}
            answers.append(client.get("/v1/conversations", headers=headers).status_code)
            store = SQLiteStore(home / "threadline.db")  # an operator revokes them all
            try:
                tokens = store.tokens
                for token in tokens.tokens():
                    tokens.revoke(token.id, token.created_at)
            finally:
                store.close()
            answers.append(client.get("/v1/conversations", headers=headers).status_code)
        started.update(where, answers=answers)

    monkeypatch.setattr("uvicorn.run", run)
    return started


def test_serve_refuses_a_public_host_without_tokens(tl: Invoke, home: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    started = _serve(monkeypatch, home)
    for args, why in [(("--host", "0.0.0.0"), "0.0.0.0 is not a loopback host"),
                      (("--require-tokens",), "--require-tokens was given")]:
        refused = tl("serve", *args)
        assert refused.code == 2, refused.err
        assert why in refused.err and "threadline tokens create --admin" in refused.err
    assert started == {}  # it never listened
    ann = tl("tokens", "create", "--user", "ann", "--json").json()["id"]
    assert tl("tokens", "revoke", ann, "--yes").code == 0
    assert tl("serve", "--host", "0.0.0.0").code == 2  # a revoked token is no token
    assert started == {}


def test_serve_on_a_public_host_requires_tokens_for_good(tl: Invoke, home: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    admin = tl("tokens", "create", "--admin").out.strip()
    started = _serve(monkeypatch, home, admin)
    served = tl("serve", "--host", "0.0.0.0", "--port", "9")
    assert served.code == 0, served.err
    assert (started["host"], started["port"]) == ("0.0.0.0", 9)
    assert "bearer tokens required" in served.err
    # with every token revoked, it stays locked rather than opening up
    assert started["answers"] == [401, 200, 401]


def test_serve_on_loopback_stays_open_without_tokens(tl: Invoke, home: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    started = _serve(monkeypatch, home)
    assert tl("serve").code == 0
    assert (started["host"], started["answers"]) == ("127.0.0.1", [200])
