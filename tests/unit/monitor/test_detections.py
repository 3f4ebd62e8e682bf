# -*- coding: utf-8 -*-
"""The detection record: wire form round trip and validation errors (field, value, fix)."""
import json

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.monitor.detections import (
    KINDS, Detection, DetectionError, parse_lines)


def test_round_trip_of_every_kind():
    samples = {
        "path_loss": dict(host="r1-h1", nic=2, target="r2-h1", value=0.02, source="probe", target_nic=2),
        "path_latency": dict(host="r1-h1", nic=1, target="r2-h1", value=0.004, source="probe"),
        "nic_out": dict(host="r1-h1", nic=1, source="watcher"),
        "bfd_down": dict(host="r1-h1", nic=1, source="bfd"),
        "bgp_down": dict(host="r1-h1", nic=1, source="bgp"),
        "nic_errors": dict(host="r1-h1", nic=1, value=12, source="counters"),
        "carrier_change": dict(host="r1-h1", nic=1, value=1, source="counters"),
        "spoof_drop": dict(host="r1-h1", nic=1, value=5, source="counters"),
        "tor_down": dict(tor="r1-tor", source="frr_exporter"),
        "uplink_loss": dict(tor="r1-tor", spine="z1-spine1", value=0.5, source="frr_exporter"),
        "agent_down": dict(host="r1-h1", source="agent"),
    }
    assert set(samples) == set(KINDS)
    for kind, fields in samples.items():
        det = Detection.make(1795000000.0, kind, **fields)
        wire = json.loads(json.dumps(det.to_dict()))
        assert Detection.from_dict(wire) == det


def test_every_problem_is_reported_with_field_value_and_fix():
    with pytest.raises(DetectionError) as err:
        Detection.from_dict({"time": "soon", "kind": "path_los", "nic": 0, "source": "Probe", "hots": "x"})
    fields = [p.path for p in err.value.problems]
    assert fields == ["hots", "time", "kind", "source", "nic"]
    assert all(p.fix for p in err.value.problems)
    assert "path_loss" in str(err.value)  # the fix lists the valid kinds


def test_kind_requires_its_fields():
    with pytest.raises(DetectionError) as err:
        Detection.make(1.0, "path_loss", host="r1-h1", value=0.1, source="probe")
    assert sorted(p.path for p in err.value.problems) == ["target"]  # nic is optional: null = every NIC
    with pytest.raises(DetectionError) as err:
        Detection.make(1.0, "uplink_loss", tor="r1-tor", spine="s1", value=1.5, source="frr_exporter")
    assert [p.path for p in err.value.problems] == ["value"]


def test_parse_lines_names_the_line():
    good = json.dumps(Detection.make(5.0, "agent_down", host="h1").to_dict())
    assert len(list(parse_lines(["", good, good]))) == 2
    with pytest.raises(DetectionError) as err:
        list(parse_lines([good, "{not json"], where="events.jsonl"))
    assert "events.jsonl line 2" in str(err.value)
    with pytest.raises(DetectionError) as err:
        list(parse_lines([good, good, '{"time": 1, "kind": "nic_out", "source": "watcher"}']))
    assert "line 3" in str(err.value)


def test_target_nic_is_optional_and_checked():
    plain = Detection.make(1.0, "path_loss", host="a", nic=1, target="b", value=0.1, source="probe")
    assert "target_nic" not in plain.to_dict()
    with pytest.raises(DetectionError) as err:
        Detection.make(1.0, "nic_out", host="a", nic=1, target_nic=2, source="watcher")
    assert [p.path for p in err.value.problems] == ["target_nic"]


def test_agent_events_become_detections():
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import monitor_fabric as fabrics  # pylint: disable=import-outside-toplevel
    from ansible_collections.netscale.multinic.plugins.module_utils.monitor.detections import from_agent_event

    idx = fabrics.index()
    base = {"time": 100.0, "source": "fabric_monitor", "host": "z1r1h1", "rack": "z1r1", "zone": "z1", "slot": None,
            "detail": "x"}
    (loss,) = from_agent_event(dict(base, kind="probe_loss", scope="path", nic="eth1", target="fd00::1",
                                    target_host="z1r2h1", value=0.05), idx)
    assert (loss.kind, loss.nic, loss.target, loss.value, loss.source) == ("path_loss", 2, "z1r2h1", 0.05, "probe")
    unreach = from_agent_event(dict(base, kind="target_unreachable", scope="target", target="fd00::9",
                                    target_host="z1r2h1,z1r2h2", value=None), idx)
    assert [(d.target, d.nic, d.value) for d in unreach] == [("z1r2h1", None, 1.0), ("z1r2h2", None, 1.0)]
    (out,) = from_agent_event(dict(base, kind="egress_out", scope="nic", nic="eth3"), idx)
    assert (out.kind, out.nic, out.source) == ("nic_out", 4, "watcher")
    assert from_agent_event(dict(base, kind="egress_in", nic="eth3")) == []
    with pytest.raises(DetectionError, match="unknown agent event kind"):
        from_agent_event(dict(base, kind="moon_phase"))
    with pytest.raises(DetectionError) as err:
        from_agent_event(dict(base, kind="egress_out", nic="eth9"), idx)  # a 4-NIC host has no eth9
    assert [p.path for p in err.value.problems] == ["nic"]


def test_drops_of_a_full_nic_are_not_a_detection_errors_are():
    """A NIC at line rate drops at its queue (the eBPF redirect counts it as the NIC's tx dropped): every NIC of a busy
    host would look faulty. nic_drops stays an agent event, not a detection; nic_errors (a bad link) is one."""
    from ansible_collections.netscale.multinic.plugins.module_utils.monitor.detections import from_agent_event

    base = {"time": 100.0, "source": "fabric_monitor", "host": "r1-h1", "rack": "r1", "zone": "z1", "slot": None,
            "scope": "nic"}
    for nic in ("eth0", "eth1", "eth2", "eth3"):
        assert from_agent_event(dict(base, kind="nic_drops", nic=nic, value=1128,
                                     detail="NIC %s: 1128 receive/transmit drops" % nic)) == []
    (err,) = from_agent_event(dict(base, kind="nic_errors", nic="eth1", value=3, detail="NIC eth1: 3 errors"))
    assert (err.kind, err.nic, err.value, err.source) == ("nic_errors", 2, 3, "counters")
