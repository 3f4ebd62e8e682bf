"""Lab monitoring's ports: the relay and exporter blocks follow Prometheus's port, and a port already in use
fails the start naming it, before anything is started or recorded (two labs side by side, the CI lanes)."""
import os
import socket

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.lab import monitoring
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_relay_and_exporter_ports_follow_prometheus_port(ready_lab):
    lay = monitoring.layout(ready_lab, port=20000, agent_program="/x")
    ports = dict(monitoring.tcp_ports(lay))
    assert ports["prometheus"] == 20000
    relay = sorted(p for w, p in ports.items() if w.startswith("relay"))
    frr = sorted(p for w, p in ports.items() if w.startswith("frr"))
    assert relay == list(range(20010, 20010 + len(ready_lab.spec.hosts)))
    assert frr == list(range(20110, 20110 + len(ready_lab.spec.spines) + len(ready_lab.spec.racks)))
    # the blocks of the default port and of the next lab's do not overlap
    other = set(p for _what, p in monitoring.tcp_ports(monitoring.layout(ready_lab, port=20300, agent_program="/x")))
    assert not other & set(ports.values())
    explicit = monitoring.layout(ready_lab, port=20000, relay_port=21000, frr_port=22000, agent_program="/x")
    assert explicit["relay"]["hosts"][0]["listen_port"] == 21000
    assert explicit["frr"][0]["address"] == "127.0.0.1:22000"


def test_ports_in_use_sees_a_listener():
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    port = held.getsockname()[1]
    try:
        assert monitoring.ports_in_use("127.0.0.1", [("a", port)]) == [("a", port)]
    finally:
        held.close()
    assert monitoring.ports_in_use("127.0.0.1", [("a", port)]) == []


def test_start_with_a_port_in_use_names_it_and_starts_nothing(ready_lab):
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    port = held.getsockname()[1]
    before = open(ready_lab.state_file).read()
    try:
        with pytest.raises(LabError) as err:
            monitoring.start(ready_lab, port=port, relay_port=port + 1000, frr_port=port + 2000,
                             agent_program=os.path.join(REPO, "roles", "fabric_monitor", "files",
                                                        "netscale-fabric-monitor.py"))
    finally:
        held.close()
    msg = str(err.value)
    assert "%d (prometheus)" % port in msg and "lab_monitoring_port" in msg and "nothing was started" in msg
    assert open(ready_lab.state_file).read() == before
    assert not os.path.exists(os.path.join(ready_lab.sdir, "monitoring"))


def test_log_tail_reads_the_end(tmp_path):
    log = tmp_path / "prometheus.log"
    log.write_text("".join("line %d\n" % i for i in range(100)) + "err: address already in use\n")
    tail = monitoring.log_tail(str(log), lines=2)
    assert tail == "line 99 | err: address already in use"
    assert monitoring.log_tail(str(tmp_path / "none.log")) == ""


def test_a_port_left_in_time_wait_by_a_stopped_server_is_free():
    """A restarted Prometheus or relay: its last scrapes' connections sit in TIME_WAIT on the server's side;
    only a listener holds the port (the lab's monitoring restarts on a changed topology)."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _addr = srv.accept()
    conn.close()      # the server closes first: its side of the connection goes to TIME_WAIT
    client.recv(1)
    client.close()
    srv.close()
    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        plain.bind(("127.0.0.1", port))
        time_wait_blocks_plain_bind = False
    except OSError:
        time_wait_blocks_plain_bind = True
    finally:
        plain.close()
    assert time_wait_blocks_plain_bind   # the situation the CI rehearsal met (else this test proves nothing)
    assert monitoring.ports_in_use("127.0.0.1", [("prometheus", port)]) == []
