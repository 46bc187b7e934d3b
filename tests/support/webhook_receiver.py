"""A webhook receiver for tests: real HTTP on 127.0.0.1 in a daemon thread, recording every request
(method, path, headers, body) and answering with the statuses the test queues (then 200)."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


class WebhookReceiver:
    def __init__(self, port: int = 0) -> None:
        self.requests: list[Received] = []
        self.statuses: deque[int] = deque()
        self.delay = 0.0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.requests.append(Received(self.command, self.path, headers, body, time.monotonic()))
                if receiver.delay:
                    time.sleep(receiver.delay)
                status = receiver.statuses.popleft() if receiver.statuses else 200
                payload = f"answered {status}".encode()
                self.send_response(status)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_POST = do_GET = _handle

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int, timeout: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            assert time.monotonic() < deadline, f"the receiver got {len(self.requests)} of {count} requests"
            time.sleep(0.05)
        return self.requests

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
