"""``threadline audit export|verify``: the log as Parquet files an auditor can query, and the
check that they are still what was exported (docs/audit.md)."""

from __future__ import annotations

from datetime import date
from importlib.util import find_spec
from typing import Any

import click

from threadline.cache.pricing import profile
from threadline.cli._common import (
    Context,
    billing_options,
    json_option,
    output,
    pass_context,
    table,
)
from threadline.errors import InputError


def _require_extra() -> None:
    missing = [name for name in ("pyarrow", "msgspec") if find_spec(name) is None]
    if missing:
        raise InputError(f"the audit trail needs the audit extra ({', '.join(missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} missing)",
                         hint="pip install 'threadline[audit]'")


def _day(option: str, value: str | None) -> date | None:
    if value is None:
        return None
    try:
        if len(value) != 10:
            raise ValueError
        return date.fromisoformat(value)
    except ValueError:
        raise InputError(f"{option} {value!r} is not a date; nothing was written",
                         hint="write a UTC day as YYYY-MM-DD") from None


_ENDPOINT = click.option("--endpoint-url", metavar="URL",
                         help="S3-compatible endpoint for s3:// (http://host:port). Default: "
                              "$AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS.")


@click.group()
def audit() -> None:
    """Export the log as Parquet files, and verify an export."""


@audit.command("export")
@click.option("--out", required=True, metavar="DIR|URL",
              help="A directory, or s3://bucket/prefix.")
@click.option("--since", metavar="YYYY-MM-DD",
              help="First UTC day. Default: the newest day --out holds, else the log's first.")
@click.option("--until", metavar="YYYY-MM-DD", help="Last UTC day (included). Default: today.")
@billing_options("Cache profile the cost columns are billed under (threadline cost "
                   "profiles).")
@click.option("--no-content", is_flag=True,
              help="Leave out the content columns: messages, replies, requests, summaries.")
@click.option("--rows-per-file", type=click.IntRange(min=1), default=100_000,
              show_default=True, help="Most rows in one file.")
@_ENDPOINT
@json_option()
@pass_context
def export_(ctx: Context, out: str, since: str | None, until: str | None, profile_name: str,
            input_price: float, no_content: bool, rows_per_file: int,
            endpoint_url: str | None, as_json: bool) -> None:
    """Write the log's turns, calls, requests, compactions and memory writes as Parquet,
    partitioned by UTC day, with a manifest. Run again to resume or to bring it up to date."""
    _require_extra()
    from threadline.audit import ExportOptions, Pricing, S3Options, export, open_target

    first, last = _day("--since", since), _day("--until", until)
    if first is not None and last is not None and first > last:
        raise InputError(f"--since {first} is after --until {last}; nothing was written",
                         hint="give --since on or before --until")
    options = ExportOptions(Pricing(profile(profile_name), input_price),
                            content=not no_content, rows_per_file=rows_per_file)
    target = open_target(out, S3Options(endpoint_url=endpoint_url))
    result = export(ctx.store(), target, options, since=first, until=last)
    shown = result.to_json()
    output(shown, as_json, lambda: _print_export(shown))


def _print_export(shown: dict[str, Any]) -> None:
    rows = shown["rows"]
    click.echo(f"{shown['target']}: {len(shown['days'])} days, "
               + ", ".join(f"{n:,} {name}" for name, n in rows.items()))
    click.echo(f"{shown['files_written']} files written ({shown['bytes_written']:,} bytes), "
               f"{shown['files_unchanged']} unchanged, {shown['files_removed']} removed")


@audit.command("verify")
@click.argument("export_at", metavar="DIR|URL")
@click.option("--files-only", is_flag=True,
              help="Check the files against the manifest only, not against the log.")
@_ENDPOINT
@json_option()
@pass_context
def verify_(ctx: Context, export_at: str, files_only: bool, endpoint_url: str | None,
            as_json: bool) -> None:
    """Check every file against the manifest (size, sha256, row counts) and the exported
    items against the log's hash chains; exit 1 naming each file that does not match."""
    _require_extra()
    from threadline.audit import S3Options, open_target, verify

    target = open_target(export_at, S3Options(endpoint_url=endpoint_url))
    result = verify(target, None if files_only else ctx.store())
    shown = result.to_json()

    def human() -> None:
        checked = "" if result.conversations is None else \
            f", {result.conversations} conversations checked against the log"
        if result.ok:
            click.echo(f"{result.target}: {result.files} files, {result.rows:,} rows match "
                       f"the manifest{checked}")
            return
        table([[f.where, f.detail] for f in result.findings], ["WHERE", "PROBLEM"])

    output(shown, as_json, human)
    if not result.ok:
        click.echo(f"error: {result.target} does not match its manifest or the log: "
                   f"{len(result.findings)} problems, the first in {result.findings[0].where}",
                   err=True)
        click.get_current_context().exit(1)
