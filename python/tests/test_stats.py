"""nexthop.forwarder_stats against `nexthop stats --json` on the same endpoint."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

import nexthop

SNAPSHOT = {
    "uptime_seconds": 2.5,
    "fib_generation": 3,
    "frames_in": 1000,
    "bytes_in": 60000,
    "forwarded": 990,
    "dropped": 10,
    "rx": [{"port": 0, "frames": 1000, "bytes": 60000}],
    "drops": {"action": 10},
}


def serve(body: bytes, status: int = 200):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"127.0.0.1:{srv.server_address[1]}"


def test_counters_match_the_cli(cli):
    srv, addr = serve(json.dumps(SNAPSHOT).encode())
    try:
        ours = nexthop.forwarder_stats(addr)
        theirs = json.loads(cli("stats", "--json", "--addr", addr))
        assert ours == theirs
        assert ours["frames_in"] == 1000 and ours["drops"] == {"action": 10}
        assert ours["rx"][0]["frames"] == 1000
    finally:
        srv.shutdown()


def test_errors():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionError, match=str(port)):
        nexthop.forwarder_stats(f"127.0.0.1:{port}", timeout=2)
    srv, addr = serve(b"<html>not counters</html>")
    try:
        with pytest.raises(nexthop.FormatError, match="not a stats document"):
            nexthop.forwarder_stats(addr)
    finally:
        srv.shutdown()
    srv, addr = serve(b"{}", status=404)
    try:
        with pytest.raises(nexthop.FormatError, match="404"):
            nexthop.forwarder_stats(addr)
    finally:
        srv.shutdown()
    with pytest.raises(OSError):
        nexthop.forwarder_stats("no-such-host.invalid:1", timeout=1)
    with pytest.raises(ValueError, match="timeout"):
        nexthop.forwarder_stats("127.0.0.1:1", timeout=0)
