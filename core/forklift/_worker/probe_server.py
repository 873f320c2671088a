"""The HTTP server behind a worker's probes: ``http.server`` on a thread of its own.

It answers from plain callables (a path each) that read state the worker keeps up to date, so
an answer never waits for the event loop, a handler or the database. The ``/metrics`` page is
one more route when the probes and Prometheus share a port.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from forklift._base.errors import ConfigError

__all__ = ["ProbeServer", "Route"]

#: What a path answers: (HTTP status, content type, body).
Route = Callable[[], tuple[int, str, bytes]]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        route = self.server.routes.get(self.path.split("?", 1)[0])
        if route is None:
            status, kind, body = 404, "text/plain; charset=utf-8", b"not found\n"
        else:
            try:
                status, kind, body = route()
            except Exception as exc:  # a probe that cannot answer says so, it does not hang
                status, kind = 500, "text/plain; charset=utf-8"
                body = f"{type(exc).__name__}: {exc}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a kubelet probes every few seconds; those lines would drown the worker's log."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[str, Route]


class ProbeServer:
    """Bound at once (a port that cannot be had fails at start, naming ``flag``); serves from
    :meth:`start` until :meth:`stop`."""

    def __init__(self, port: int, host: str = "0.0.0.0", *, flag: str = "--health-port") -> None:
        try:
            self._server = _Server((host, port), _Handler)
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise ConfigError(f"{flag} {port}: cannot listen on {host}:{port} ({why})",
                              port=port) from None
        self._server.routes = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        """The port it listens on (the one the system chose, when given 0)."""
        return int(self._server.server_address[1])

    def route(self, path: str, answer: Route) -> None:
        self._server.routes[path] = answer

    def start(self) -> None:
        """Serve on a daemon thread (again after a restart of the service: once)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                    name="forklift-probes", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                self._server.shutdown()
            self._thread = None
        self._server.server_close()
