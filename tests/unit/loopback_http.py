"""The HTTP server under every fake service of the tests: 127.0.0.1, an ephemeral port, a
thread per request, served from a background thread and stopped at once."""

from __future__ import annotations

import contextlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# serve_forever() checks for shutdown() once per poll; stop() also wakes it with a connection.
POLL_INTERVAL = 0.01


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer on 127.0.0.1 that takes a burst of connections at once.

    The default listen backlog is 5. The reranker and the embedder open up to 25 connections
    at once: past the backlog the kernel drops the SYNs and the client resends them after its
    1 s retransmission timeout, so a test took 1 to 2 s longer at random.
    """

    request_queue_size = 128
    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.port: int = self.server_address[1]
        self._thread = threading.Thread(target=self.serve_forever, args=(POLL_INTERVAL,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, close the socket and wait for the serving thread."""
        # shutdown() waits for the serving loop's next poll (6 ms on average, 70 stops a
        # suite); a connection wakes the loop at once. Bounded: the poll ends it anyway.
        stopping = threading.Thread(target=self.shutdown)
        stopping.start()
        while stopping.is_alive():
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            stopping.join(0.002)
        self.server_close()
        self._thread.join(timeout=5)
