"""Prometheus text exposition: unit-suffixed names, the closed label set, the HTTP endpoint."""
import re
import urllib.request

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.monitor import exporter

LAB = {"host": "h1", "rack": "r1", "zone": "z1"}


def test_render_groups_and_escapes():
    text = exporter.render([
        ("fabric_monitor_probes_lost_total", dict(LAB, nic="eth0", target="h2"), 3),
        ("fabric_monitor_probes_sent_total", dict(LAB, nic="eth0", target="h2"), 10),
        ("fabric_monitor_probe_loss_ratio", dict(LAB, nic="eth0", target='we"ird'), 0.25),
        ("fabric_monitor_probe_loss_ratio", dict(LAB, nic="eth1", target="h2"), None),
    ])
    lines = text.splitlines()
    assert lines[0] == "# HELP fabric_monitor_probes_sent_total Probes sent per local NIC and target."
    assert 'fabric_monitor_probes_sent_total{host="h1",rack="r1",zone="z1",nic="eth0",target="h2"} 10' in lines
    assert 'fabric_monitor_probe_loss_ratio{host="h1",rack="r1",zone="z1",nic="eth0",target="we\\"ird"} 0.25' in lines
    assert not any("eth1" in x for x in lines)   # no value: no sample
    assert lines.index("# TYPE fabric_monitor_probes_sent_total counter") < \
        lines.index("# TYPE fabric_monitor_probes_lost_total counter")


def test_names_carry_a_unit_and_labels_are_closed():
    for name, kind, dummy in exporter.METRICS:
        assert re.search(r"_(total|seconds|ratio|up|out|sessions|sessions_up|pairs|second)$", name), name
        assert (kind == "counter") == name.endswith("_total"), name
    with pytest.raises(ValueError, match="not allowed"):
        exporter.render([("fabric_monitor_nic_up", dict(LAB, nic="eth0", slot="1"), 1)])
    with pytest.raises(ValueError, match="unknown metric"):
        exporter.render([("node_load1", LAB, 1)])


def test_http_endpoint():
    server = exporter.serve("127.0.0.1", 0, lambda: exporter.render([("fabric_monitor_nic_up", dict(LAB, nic="eth0"), 1)]))
    try:
        port = server.server_address[1]
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
        assert 'fabric_monitor_nic_up{host="h1",rack="r1",zone="z1",nic="eth0"} 1' in body
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen("http://127.0.0.1:%d/other" % port, timeout=5)
    finally:
        server.shutdown()
        server.server_close()
