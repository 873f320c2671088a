"""A real HTTP server on localhost that webhook deliveries are sent to, in a thread.

Each path answers from a script: a list of answers given in turn, the last one repeated. An
answer is a status, extra headers, and how long to hold the request before answering (the
hold ends early when the server stops, so a test never waits on a stuck handler). The target
counts the requests it holds at once, for tests of an endpoint's concurrency.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    hold: float = 0.0
    body: bytes = b'{"ok":true}'


@dataclass(frozen=True)
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when the request arrived


class Target:
    def __init__(self) -> None:
        self.scripts: dict[str, list[Answer]] = {}
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.in_flight = 0
        self.most_in_flight = 0
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                with target.lock:
                    target.seen.append(Seen(self.path, {k.lower(): v for k, v in
                                                        self.headers.items()}, body,
                                            time.monotonic()))
                    script = target.scripts.get(self.path, [Answer()])
                    answer = script.pop(0) if len(script) > 1 else script[0]
                    target.in_flight += 1
                    target.most_in_flight = max(target.most_in_flight, target.in_flight)
                try:
                    if answer.hold:
                        target.stopping.wait(answer.hold)
                finally:
                    with target.lock:
                        target.in_flight -= 1
                self.send_response(answer.status)
                for k, v in answer.headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def script(self, path: str, *answers: Answer) -> str:
        with self.lock:
            self.scripts[path] = list(answers) or [Answer()]
        return self.url(path)

    def requests(self, path: str) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if s.path == path]


def serving() -> Iterator[Target]:
    target = Target()
    target.thread.start()
    try:
        yield target
    finally:
        target.stopping.set()
        target.server.shutdown()
        target.server.server_close()
        target.thread.join(10)
