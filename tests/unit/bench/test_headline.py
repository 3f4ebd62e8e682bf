# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers of the headline benchmark: statistics, route rewriting, chunking, report and SVG."""

from __future__ import annotations

import json
import socket
import threading
import xml.dom.minidom

import pytest

from ansible_collections.netscale.multinic.bench.headline import flows, report, stats, svg
from ansible_collections.netscale.multinic.bench.headline.labctl import (
    BenchError, parse_net_dev, route_argv, single_nic_route)


def test_percentile_matches_linear_interpolation():
    vals = [5, 1, 4, 2, 3]
    assert stats.percentile(vals, 0) == 1
    assert stats.percentile(vals, 50) == 3
    assert stats.percentile(vals, 100) == 5
    assert stats.percentile(vals, 25) == 2
    assert stats.percentile([1, 2], 99) == pytest.approx(1.99)
    with pytest.raises(ValueError):
        stats.percentile([], 50)
    with pytest.raises(ValueError):
        stats.percentile([1], 101)


def test_shares_jain_cdf():
    assert stats.shares({"eth0": 3, "eth1": 1}) == {"eth0": 0.75, "eth1": 0.25}
    assert stats.shares({"eth0": 0, "eth1": 0}) == {"eth0": 0.0, "eth1": 0.0}
    assert stats.jain([1, 1, 1, 1]) == 1.0
    assert stats.jain([1, 0, 0, 0]) == 0.25
    assert stats.jain([0, 0]) is None
    assert stats.cdf([3, 1, 2]) == [(1.0, 1 / 3.0), (2.0, 2 / 3.0), (3.0, 1.0)]
    assert stats.gbit(125000000, 1.0) == 1.0


def test_counter_delta_and_net_dev():
    text = ("Inter-|   Receive |  Transmit\n face |bytes packets|bytes\n"
            "  eth0: 100 1 0 0 0 0 0 0 200 2 0 0 0 0 0 0\n"
            "ms1-eth0: 5 1 0 0 0 0 0 0 7 1 0 0 0 0 0 0\n")
    c = parse_net_dev(text)
    assert c["eth0"] == {"rx": 100, "tx": 200}
    assert c["ms1-eth0"] == {"rx": 5, "tx": 7}
    later = {"eth0": {"rx": 150, "tx": 260}}
    assert stats.counter_delta({"eth0": c["eth0"]}, later) == {"eth0": {"rx": 50, "tx": 60}}


ECMP4 = {"dst": "default", "prefsrc": "198.18.0.136", "flags": [],
         "nexthops": [{"gateway": "169.254.1.1", "dev": "eth%d" % k, "weight": 1, "flags": ["onlink"]}
                      for k in range(4)]}
ECMP6 = {"dst": "default", "prefsrc": "fd00:10:0:8::8", "metric": 1024, "flags": [],
         "nexthops": [{"gateway": "fe80::1", "dev": "eth%d" % k, "weight": 1, "flags": []} for k in range(2)]}


def test_route_argv_recreates_ecmp_route():
    assert route_argv(4, ECMP4) == (
        ["ip", "-4", "route", "replace", "default", "src", "198.18.0.136"]
        + sum([["nexthop", "via", "169.254.1.1", "dev", "eth%d" % k, "weight", "1", "onlink"] for k in range(4)], []))
    assert route_argv(6, ECMP6)[:8] == ["ip", "-6", "route", "replace", "default", "src", "fd00:10:0:8::8", "metric"]


def test_single_nic_route_keeps_source_and_onlink():
    one = single_nic_route(ECMP4, "eth0")
    assert route_argv(4, one) == ["ip", "-4", "route", "replace", "default", "src", "198.18.0.136",
                                  "via", "169.254.1.1", "dev", "eth0", "onlink"]
    assert route_argv(6, single_nic_route(ECMP6, "eth0"))[-4:] == ["via", "fe80::1", "dev", "eth0"]
    with pytest.raises(BenchError, match="eth9"):
        single_nic_route(ECMP4, "eth9")


def test_chunk_sizes():
    assert flows.chunk_sizes(10, 4) == [4, 4, 2]
    assert flows.chunk_sizes(8, 4) == [4, 4]
    assert sum(flows.chunk_sizes(256 * 10 ** 6, 500000)) == 256 * 10 ** 6
    with pytest.raises(ValueError):
        flows.chunk_sizes(10, 0)


@pytest.fixture()
def loopback_server():
    """flows.serve on ::1 in a thread (no lab, no root); yields the port."""
    probe = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    probe.bind(("::1", 0))
    port = probe.getsockname()[1]
    probe.close()
    t = threading.Thread(target=flows.serve, args=(port,), daemon=True)
    t.start()
    for _i in range(100):
        try:
            socket.create_connection(("::1", port), timeout=1).close()
            break
        except OSError:
            threading.Event().wait(0.02)
    yield port


def test_flows_protocol_on_loopback(loopback_server, capsys):
    port = loopback_server
    capsys.readouterr()
    put = flows.xfer("::1", port, "put", 3 * 10 ** 6 + 7, 3, 500000)
    assert put["ok"] and put["moved"] == 3 * 10 ** 6 + 7
    assert sum(s["chunks"] for s in put["per_stream"]) == 7
    get = flows.xfer("::1", port, "get", 2 * 10 ** 6, 4, 300000)
    assert get["ok"] and get["moved"] == 2 * 10 ** 6
    r = flows.reads("::1", port, 100000, 2, 0.3)
    assert r["samples"] and not r["errors"]
    s = flows.surge("::1", port, 2, 0.3)
    assert s["bytes"] > 0


def _results():
    tr = []
    for mode, secs, sh in (("before", 10.0, [1, 0, 0, 0]), ("after", 2.6, [1, 1, 1, 1])):
        for direction in ("egress", "ingress"):
            tr.append({"host": "h4", "nics": 4, "scenario": "checkpoint", "direction": direction, "flows": 32,
                       "mode": mode, "rep": 0, "bytes": 256 * 10 ** 6, "seconds": secs,
                       "nic_bytes": {"eth%d" % k: v * 64 for k, v in enumerate(sh)}})
    tr.append({"host": "h4", "nics": 4, "scenario": "few_flows", "direction": "egress", "flows": 4, "mode": "after",
               "rep": 0, "bytes": 1, "seconds": 5.0, "nic_bytes": {"eth0": 1, "eth1": 1, "eth2": 0, "eth3": 0}})
    reads = [{"host": "h4", "nics": 4, "mode": m, "rep": 0, "surge": "paced", "surge_gbit_per_s": 0.2,
              "surge_offered_gbit_per_s": 0.4, "samples": s, "errors": [],
              "nic_shares_rx": {"eth0": 1.0, "eth1": 0.0}}
             for m, s in (("before", [1.0, 2.0, 4.0]), ("after", [0.1, 0.2, 0.4]))]
    return {"id": "t", "fabric": "lab", "machine": {"cpus": 2, "kernel": "6.x"},
            "params": {"rate": "200mbit", "family": "ipv6", "size": 256 * 10 ** 6, "flows": 32, "few_flows": [4],
                       "few_size": 10 ** 6, "read_bytes": 10 ** 6, "readers": 4, "read_window": 15,
                       "surge_flows": 32, "reps": 1},
            "transfers": tr, "reads": reads}


def test_summary_targets_and_report_files():
    files, summary = report.build(_results())
    rows = [r for r in summary["transfers"] if r["scenario"] == "checkpoint"]
    assert {r["speedup"] for r in rows} == {3.85}
    assert rows[0]["after"]["nic_shares"] == {"eth0": 0.25, "eth1": 0.25, "eth2": 0.25, "eth3": 0.25}
    assert rows[0]["before"]["idle_nics"] == 3
    few = [r for r in summary["transfers"] if r["scenario"] == "few_flows"][0]
    assert few["after"]["idle_nics"] == 2 and "speedup" not in few
    t = {x["name"]: x for x in summary["targets"]}
    assert all(x["pass"] for x in t.values()) and len(t) == 3
    ratio = summary["reads"]["h4 paced surge"]["p99_after_over_before"]
    assert ratio == pytest.approx(0.1)
    assert set(files) == {"results.json", "summary.md", "throughput.svg", "few_flows.svg", "nic_shares.svg",
                          "latency_cdf.svg"}
    for name, text in files.items():
        if name.endswith(".svg"):
            xml.dom.minidom.parseString(text)
    assert json.loads(files["results.json"])["summary"]["targets"]
    assert "| h4 | 4 | save (egress) | 32 | 10.0 | 2.6 |" in files["summary.md"]


def test_targets_fail_below_threshold():
    rows = [{"host": "h2", "nics": 2, "scenario": "checkpoint", "direction": "ingress", "flows": 32, "speedup": 1.8}]
    (t,) = stats.targets(rows, {}, 32)
    assert t["target"] == ">= 1.9" and not t["pass"]


def test_svg_charts_are_well_formed():
    for text in (svg.grouped_bars(["a\nb", "c"], [("before", [0.19, None]), ("after", [0.76, 0.38])], "t", "Gbit/s"),
                 svg.share_bars([("x", {"eth0": 0.5, "eth1": 0.5}), ("y", {"eth0": 1.0})], "shares"),
                 svg.cdf_lines([("before", stats.cdf([1, 2, 30])), ("after", [])], "cdf", "s"),
                 svg.cdf_lines([("lin", stats.cdf([0.5, 1]))], "cdf", "s", log_x=False)):
        doc = xml.dom.minidom.parseString(text)
        assert doc.documentElement.tagName == "svg"


def test_least_loaded_and_mptcp_rows_and_read_targets():
    """The few-flow rows and the job-read p99 of the extra modes (issue 14 item 5)."""
    res = _results()
    for mode, secs, sh in (("before", 8.0, [1, 0, 0, 0]), ("least_loaded", 2.0, [1, 1, 1, 1]),
                           ("mptcp", 2.1, [1, 1, 1, 1])):
        res["transfers"].append({"host": "h4", "nics": 4, "scenario": "few_flows", "direction": "egress", "flows": 4,
                                 "mode": mode, "rep": 0, "bytes": 1, "seconds": secs,
                                 "nic_bytes": {"eth%d" % k: v for k, v in enumerate(sh)}})
    for mode, s in (("least_loaded", [0.5, 0.6, 0.8]), ("mptcp", [0.2, 0.3, 2.0])):
        res["reads"].append({"host": "h4", "nics": 4, "mode": mode, "rep": 0, "surge": "paced",
                             "surge_gbit_per_s": 0.3, "surge_offered_gbit_per_s": 0.4, "samples": s, "errors": [],
                             "nic_shares_rx": {"eth0": 0.5, "eth1": 0.5}})
    files, summary = report.build(res)
    few = [r for r in summary["transfers"] if r["scenario"] == "few_flows"][0]
    assert few["speedup"] == 1.6 and few["speedup_least_loaded"] == 4.0 and few["speedup_mptcp"] == 3.81
    assert few["least_loaded"]["idle_nics"] == 0
    reads = summary["reads"]["h4 paced surge"]
    assert reads["p99_least_loaded_over_before"] == pytest.approx(0.7930 / 3.9600, abs=1e-3)
    t = {x["name"]: x for x in summary["targets"]}
    assert t["job read p99 least_loaded/before, h4 paced surge (4 NICs)"]["pass"]
    assert not t["job read p99 mptcp/before, h4 paced surge (4 NICs)"]["pass"]   # 1.946 / 3.96 > 0.25
    md = files["summary.md"]
    assert "| h4 | save (egress) | 4 | 0.0 | 4.00x | 25% / 25% / 25% / 25% | 0.0 | 3.81x |" in md
    assert "| h4 paced surge | mptcp | 3 |" in md
