"""``threadline tokens create|list|revoke``: the bearer tokens the HTTP service accepts.

A token's secret is printed once, when it is created; the database keeps only its hash, so a
lost secret cannot be shown again (revoke it and create another). Revoking takes effect on the
next request, on every server over the same database.
"""

from __future__ import annotations

import click

from threadline.cli._common import (
    Context,
    confirm,
    emit_json,
    json_option,
    output,
    pass_context,
    table,
    yes_option,
)
from threadline.errors import InputError
from threadline.items import format_time, utc_now
from threadline.stores.tokens import ApiToken, TokenBackend, TokenRole, issue


def _tokens(ctx: Context) -> TokenBackend:
    store = ctx.store()
    if store.tokens is None:
        raise InputError(f"{type(store).__name__} keeps no tokens")
    return store.tokens


@click.group()
def tokens() -> None:
    """Bearer tokens for the HTTP service: create, list, revoke."""


@tokens.command()
@click.option("--admin", is_flag=True, help="A token that reaches everything, every user's.")
@click.option("--user", "user_id", metavar="U",
              help="A token bound to user U: only U's conversations and memory.")
@click.option("--name", help="What the token is for (shown by tokens list).")
@json_option(help="Print the token and its secret as JSON.")
@pass_context
def create(ctx: Context, admin: bool, user_id: str | None, name: str | None,
           as_json: bool) -> None:
    """Create a token and print its secret, once: nothing keeps it."""
    if admin == (user_id is not None):
        raise InputError("pass exactly one of --admin and --user U",
                         hint="threadline tokens create --user ann (or --admin)")
    backend = _tokens(ctx)
    token, secret = issue(backend, role=TokenRole.ADMIN if admin else TokenRole.USER,
                          user_id=user_id, name=name, at=utc_now())
    if as_json:
        emit_json({**token.to_json(), "secret": secret})
        return
    click.echo(secret)  # alone on stdout, so a script can capture it
    click.echo(f"created {_describe(token)}; this is the only time the secret is shown: "
               "store it now, and send it as 'Authorization: Bearer SECRET'", err=True)


@tokens.command(name="list")
@json_option()
@pass_context
def list_(ctx: Context, as_json: bool) -> None:
    """List tokens, revoked ones too (never their secrets)."""
    found = _tokens(ctx).tokens()
    output([t.to_json() for t in found], as_json, lambda: _list(found))


def _list(found: list[ApiToken]) -> None:
    if not found:
        click.echo("no tokens: the service is open on loopback hosts only; create one with: "
                   "threadline tokens create --admin")
        return
    table([[t.id, str(t.role), t.user_id or "-", format_time(t.created_at)[:19],
            "active" if t.revoked_at is None else f"revoked {format_time(t.revoked_at)[:19]}",
            t.name or ""] for t in found],
          ["ID", "ROLE", "USER", "CREATED", "STATUS", "NAME"])


@tokens.command()
@click.argument("token_id", metavar="ID")
@yes_option()
@json_option()
@pass_context
def revoke(ctx: Context, token_id: str, yes: bool, as_json: bool) -> None:
    """Revoke a token: requests with it are refused from now on, on every server."""
    backend = _tokens(ctx)
    token = backend.get(token_id)  # an unknown id fails before anything is asked or changed
    if token.revoked_at is not None:
        output(token.to_json(), as_json,
               f"{_describe(token)} was already revoked at {format_time(token.revoked_at)}")
        return
    confirm(f"revoke {_describe(token)}", yes)
    revoked = backend.revoke(token_id, utc_now())
    output(revoked.to_json(), as_json, f"revoked {_describe(revoked)}")


def _describe(token: ApiToken) -> str:
    whose = "admin token" if token.role is TokenRole.ADMIN else f"token for user {token.user_id}"
    return f"{whose} {token.id}" + (f" ({token.name})" if token.name else "")
