"""The sidecar's HTTP health probe against a real local HTTP server (127.0.0.1 only)."""
import http.server
import threading

from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector.sidecar import probe_health


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's naming
        code = 200 if self.path == "/healthz" else 503
        self.send_response(code)
        self.end_headers()

    def log_message(self, *args):
        return


def test_http_probe_reports_status_codes():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = "http://127.0.0.1:%d" % server.server_address[1]
        ok, why = probe_health({"type": "http", "url": base + "/healthz"})
        assert ok and "-> 200" in why
        ok, why = probe_health({"type": "http", "url": base + "/other"})
        assert not ok and "-> 503" in why
        ok, why = probe_health({"type": "http", "url": base + "/other", "expect_status": [503]})
        assert ok
    finally:
        server.shutdown()
        server.server_close()
    ok, why = probe_health({"type": "http", "url": base + "/healthz", "timeout": 0.5})
    assert not ok and "Error" in why
