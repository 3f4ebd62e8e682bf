# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus text exposition of the monitoring agent (pure rendering plus a small HTTP server).

Every series carries the labels ``host``, ``rack``, ``zone`` and, where it has one, ``nic`` and
``target`` - no other label, and no value that is not bounded by the plan (see pinglist). Names end in
their unit (``_total``, ``_seconds``, ``_ratio``). Scrape with ``honor_labels: true`` (the agent's
own host/rack/zone labels win) or through node_exporter's textfile collector (``--textfile``).

The agent being down shows as ``up == 0`` (or a stale textfile: ``fabric_monitor_agent_heartbeat
_timestamp_seconds``), never as probe loss: a stopped agent exports no probe counters at all.
"""

from __future__ import annotations

import threading

try:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
except ImportError:  # pragma: no cover - Python < 3.7
    BaseHTTPRequestHandler = object
    ThreadingHTTPServer = None

LABELS = ("host", "rack", "zone", "nic", "target")

# name -> (type, help)
METRICS = (
    ("fabric_monitor_probes_sent_total", "counter", "Probes sent per local NIC and target."),
    ("fabric_monitor_probes_answered_total", "counter", "Probes answered within the timeout."),
    ("fabric_monitor_probes_lost_total", "counter", "Probes not answered within the timeout."),
    ("fabric_monitor_probes_unreachable_total", "counter",
     "Probes lost to a target that answered on no NIC while other targets did (target down, not path loss)."),
    ("fabric_monitor_probe_rtt_seconds_total", "counter", "Sum of the round-trip times of the answered probes."),
    ("fabric_monitor_probe_rtt_max_seconds", "gauge", "Largest round-trip time of the last interval."),
    ("fabric_monitor_probe_loss_ratio", "gauge", "Loss of the last interval (lost / resolved probes)."),
    ("fabric_monitor_nic_up", "gauge", "NIC carrier (1 up, 0 down or missing)."),
    ("fabric_monitor_nic_carrier_changes_total", "counter", "Carrier changes of the NIC (kernel counter)."),
    ("fabric_monitor_nic_receive_errors_total", "counter", "Receive errors of the NIC (kernel counter)."),
    ("fabric_monitor_nic_transmit_errors_total", "counter", "Transmit errors of the NIC (kernel counter)."),
    ("fabric_monitor_nic_receive_drops_total", "counter", "Received packets dropped (kernel counter)."),
    ("fabric_monitor_nic_transmit_drops_total", "counter", "Packets dropped on transmit (kernel counter)."),
    ("fabric_monitor_nic_egress_out", "gauge", "1 while the NIC watcher keeps the NIC out of the egress set."),
    ("fabric_monitor_nic_egress_transitions_total", "counter", "NIC watcher egress-set changes seen."),
    ("fabric_monitor_bgp_sessions", "gauge", "Sidecar BGP sessions on the NIC (all slots)."),
    ("fabric_monitor_bgp_sessions_up", "gauge", "Sidecar BGP sessions on the NIC that are established."),
    ("fabric_monitor_bgp_session_changes_total", "counter", "BGP session state changes seen on the NIC."),
    ("fabric_monitor_bfd_sessions", "gauge", "BFD sessions of the per-slot responders on the NIC."),
    ("fabric_monitor_bfd_sessions_up", "gauge", "BFD sessions on the NIC that are up."),
    ("fabric_monitor_bfd_session_changes_total", "counter", "BFD session state changes seen on the NIC."),
    ("fabric_monitor_spoofed_packets_total", "counter", "Packets the datapath dropped for a forged source."),
    ("fabric_monitor_probe_rate_limit_per_second", "gauge", "Probe budget of the host (probes a second)."),
    ("fabric_monitor_probe_pairs", "gauge", "(NIC, target) pairs of the pinglist."),
    ("fabric_monitor_events_total", "counter", "Events the agent wrote."),
    ("fabric_monitor_agent_heartbeat_timestamp_seconds", "gauge", "Last time the agent's loop ran."),
)
TYPES = dict((m[0], (m[1], m[2])) for m in METRICS)


def _esc(v):
    return str(v).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _fmt(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


def render(samples):
    """Text exposition of ``samples``: [(name, {label: value}, number)], grouped per metric in the
    order of METRICS. Raises ValueError for an unknown metric or label (keeps the label set closed)."""
    by_name = {}
    for name, labels, value in samples:
        if name not in TYPES:
            raise ValueError("unknown metric %s" % name)
        bad = set(labels) - set(LABELS)
        if bad:
            raise ValueError("metric %s: labels %s are not allowed (only %s)" % (name, sorted(bad), LABELS))
        by_name.setdefault(name, []).append((labels, value))
    lines = []
    for name, kind, helptext in METRICS:
        if name not in by_name:
            continue
        lines.append("# HELP %s %s" % (name, helptext))
        lines.append("# TYPE %s %s" % (name, kind))
        for labels, value in by_name[name]:
            if value is None:
                continue
            lab = ",".join('%s="%s"' % (k, _esc(labels[k])) for k in LABELS if k in labels)
            lines.append("%s{%s} %s" % (name, lab, _fmt(value)))
    return "\n".join(lines) + "\n"


def serve(address, port, text_fn):
    """Serve ``text_fn()`` on http://address:port/metrics in a daemon thread; returns the server."""
    class Handler(BaseHTTPRequestHandler):
        timeout = 5

        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404)
                return
            body = text_fn().encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):  # quiet: one line per scrape is noise
            return

    family = 10 if ":" in address else 2
    server_cls = type("Server", (ThreadingHTTPServer,), {"address_family": family, "daemon_threads": True})
    server = server_cls((address, port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
