"""The local Prometheus is not fooled by another HTTP server on its port (a /metrics endpoint answers 200
on any path): it says the port is taken instead of reporting Prometheus running there."""

import http.server
import threading

import pytest

from common.settings import Settings
from deploy.local_stack import PrometheusServer, StackError


class AnyPath(http.server.BaseHTTPRequestHandler):
    def do_GET(self):                       # noqa: N802 - http.server's name
        body = b"# HELP up 1\nup 1\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def other_server():
    server = http.server.HTTPServer(("127.0.0.1", 0), AnyPath)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_another_server_on_the_port_is_not_taken_for_prometheus(other_server, tmp_path):
    prometheus = PrometheusServer(Settings.from_env(environ={}).replace(prometheus_port=other_server, run_dir=tmp_path),
                                  targets={})
    assert not prometheus.ready()
    with pytest.raises(StackError, match=f"port {other_server} is taken by a server that is not Prometheus"):
        prometheus.up()
