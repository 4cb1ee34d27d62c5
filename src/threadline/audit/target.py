"""Where an export goes: a local directory or an S3 prefix, through pyarrow's filesystems.

A file is either there whole or not at all: locally it is written beside its name and moved
into place; on S3 an object appears only once its upload completes. The manifest is written
the same way, so an export killed at any point leaves nothing half-written that it trusts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from threadline.errors import InputError

ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


@dataclass(frozen=True)
class S3Options:
    """How to reach S3: ``endpoint_url`` (an S3-compatible server: ``http://host:port``)
    overrides ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``; credentials and region come from
    the standard ``AWS_*`` variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)."""

    endpoint_url: str | None = None
    connect_timeout_s: float = 3.0
    request_timeout_s: float = 10.0


class Target:
    """A root on a filesystem; paths given to it are relative to the root, with ``/``."""

    def __init__(self, fs: pafs.FileSystem, root: str, url: str, *, local: bool) -> None:
        self.fs, self.root, self.url, self.local = fs, root.rstrip("/"), url, local

    def _path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def _failed(self, doing: str, err: OSError) -> InputError:
        return InputError(f"could not {doing} {self.url}: {err}",
                          hint="check that --out exists and can be written; for s3:// check "
                               "--endpoint-url (or AWS_ENDPOINT_URL) and the AWS_* credentials")

    def check(self) -> None:
        """Fail now, before anything is written, if the root cannot be used."""
        try:
            info = self.fs.get_file_info(self.root)
            if self.local:
                if info.type == pafs.FileType.File:
                    raise InputError(f"--out {self.url} is a file, not a directory",
                                     hint="name a directory (it is created if missing)")
            else:
                bucket = self.root.split("/", 1)[0]
                if self.fs.get_file_info(bucket).type == pafs.FileType.NotFound:
                    raise InputError(f"the bucket {bucket!r} of {self.url} does not exist",
                                     hint="create the bucket first")
        except OSError as err:
            raise self._failed("reach", err) from err

    def read(self, relative: str) -> bytes | None:
        """The file's bytes, or None when there is none."""
        path = self._path(relative)
        try:
            if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
                return None
            with self.fs.open_input_stream(path) as stream:
                return bytes(stream.read())
        except OSError as err:
            raise self._failed(f"read {relative} in", err) from err

    def size(self, relative: str) -> int | None:
        try:
            info = self.fs.get_file_info(self._path(relative))
        except OSError as err:
            raise self._failed(f"look at {relative} in", err) from err
        return None if info.type != pafs.FileType.File else int(info.size)

    def write(self, relative: str, data: bytes) -> None:
        path = self._path(relative)
        try:
            if not self.local:
                with self.fs.open_output_stream(path) as out:
                    out.write(data)
                return
            self.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            partial = path + ".partial"
            with self.fs.open_output_stream(partial) as out:
                out.write(data)
            self.fs.move(partial, path)
        except OSError as err:
            raise self._failed(f"write {relative} in", err) from err

    def delete(self, relative: str) -> None:
        try:
            self.fs.delete_file(self._path(relative))
        except FileNotFoundError:
            pass
        except OSError as err:
            raise self._failed(f"delete {relative} in", err) from err

    def files(self) -> list[str]:
        """Every file under the root, relative to it, sorted."""
        try:
            if self.fs.get_file_info(self.root).type == pafs.FileType.NotFound:
                return []
            found = self.fs.get_file_info(pafs.FileSelector(self.root, recursive=True))
        except OSError as err:
            raise self._failed("list", err) from err
        prefix = self.root + "/"
        return sorted(info.path[len(prefix):] for info in found
                      if info.type == pafs.FileType.File and info.path.startswith(prefix))


def open_target(out: str, s3: S3Options = S3Options()) -> Target:
    """The target ``out`` names: a directory (or ``file://`` URL) or ``s3://bucket/prefix``."""
    scheme = urlsplit(out).scheme if "://" in out else ""
    if scheme in ("", "file"):
        path = urlsplit(out).path if scheme else out
        if not path:
            raise InputError("--out names no directory", hint="give a directory or an s3:// URL")
        return Target(pafs.LocalFileSystem(), os.path.abspath(path).replace(os.sep, "/"),
                      out, local=True)
    if scheme != "s3":
        raise InputError(f"--out {out}: unknown scheme {scheme!r}",
                         hint="give a directory, a file:// URL or s3://bucket/prefix")
    parts = urlsplit(out)
    if not parts.netloc:
        raise InputError(f"--out {out} names no bucket", hint="write s3://bucket/prefix")
    root = parts.netloc + parts.path.rstrip("/")
    return Target(s3_filesystem(s3), root, out, local=False)


def s3_filesystem(options: S3Options) -> pafs.S3FileSystem:
    endpoint = options.endpoint_url or next(
        (os.environ[name] for name in ENDPOINT_VARIABLES if os.environ.get(name)), None)
    kwargs: dict[str, object] = {}
    if endpoint is not None:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InputError(f"the S3 endpoint {endpoint!r} is not an http(s) URL",
                             hint="write it as http://host:port or https://host")
        kwargs.update(endpoint_override=parts.netloc + parts.path.rstrip("/"),
                      scheme=parts.scheme)
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        kwargs["region"] = region
    return pafs.S3FileSystem(
        connect_timeout=options.connect_timeout_s, request_timeout=options.request_timeout_s,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=2), **kwargs)
