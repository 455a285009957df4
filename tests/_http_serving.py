"""HTTP plumbing shared by the tests' fake servers: run one on a daemon thread for a `with` block, and send a
reply that tolerates a client that already gave up."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

Server = TypeVar("Server", bound=ThreadingHTTPServer)


@contextmanager
def running(server: Server) -> Iterator[Server]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def send(handler: BaseHTTPRequestHandler, status: int, content_type: str, data: bytes) -> None:
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
        pass
