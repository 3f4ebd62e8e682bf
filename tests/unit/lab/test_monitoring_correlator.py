"""Lab monitoring's live correlator: what it is given (every GPU host's events file seen from the controller,
the topology without addresses or keys, the case file and the current cases in the monitoring directory),
and a missing program fails the start before anything is started or recorded."""
import json
import os

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.lab import monitoring
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import live

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
AGENT = os.path.join(REPO, "roles", "fabric_monitor", "files", "netscale-fabric-monitor.py")


def test_the_correlator_reads_every_gpu_host_from_its_overlay_upper_dir(ready_lab, tmp_path):
    lay = monitoring.layout(ready_lab, port=20500, agent_program=AGENT)
    cor = lay["correlator"]
    assert cor["program"] == os.path.join(os.path.dirname(AGENT), "netscale-case-correlator.py")
    assert os.path.isfile(cor["program"])
    hosts = [h["name"] for h in ready_lab.spec.hosts]
    assert [e["host"] for e in cor["events"]] == hosts == ["lab-r1-h1", "lab-r1-h2", "lab-r2-h1", "lab-r2-h2"]
    assert cor["events"][2]["path"] == os.path.join(ready_lab.node_dir("lab-r2-h1"), "upper", "var", "log",
                                                    "netscale-multinic", "fabric-monitor-events.jsonl")
    assert cor["case_file"] == os.path.join(lay["dir"], "cases.jsonl")
    assert cor["snapshot"] == os.path.join(lay["dir"], "cases.json")
    assert cor["prometheus"] == "http://127.0.0.1:20500"
    text = json.dumps(cor["index"])
    assert "fd00" not in text and "198.18" not in text and "md5" not in text
    p = tmp_path / "topology.json"
    p.write_text(text)
    idx = live.load_index(str(p))
    assert idx.tor_port("lab-r2-h1", 2) == "host1-1" and idx.tor_name(idx.rack_of_host("lab-r2-h1")) == "lab-r2-tor"
    other = monitoring.layout(ready_lab, port=20500, agent_program=AGENT, events_file="/var/tmp/ev.jsonl")
    assert other["correlator"]["events"][0]["path"].endswith("/upper/var/tmp/ev.jsonl")


def test_a_missing_correlator_program_starts_nothing(ready_lab, tmp_path):
    before = open(ready_lab.state_file).read()
    with pytest.raises(LabError, match="correlator_program: .*nope.py' is not a file.*netscale-case-correlator.py"):
        monitoring.start(ready_lab, port=20700, agent_program=AGENT, correlator_program=str(tmp_path / "nope.py"))
    assert open(ready_lab.state_file).read() == before
    assert not os.path.exists(os.path.join(ready_lab.sdir, "monitoring"))
