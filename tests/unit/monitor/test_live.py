# -*- coding: utf-8 -*-
"""The live correlator (monitor/live.py): tailing the agents' events files (rotation, truncation, a partial
last line, bad lines), one round of read-feed-tick-write, the case file the EDA source reads, the current
cases, and the program (bad arguments, SIGTERM)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.netscale.multinic.bench.monitor_sim import Fault, Simulator
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import live
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.correlate import correlate
from ansible_collections.netscale.multinic.plugins.module_utils.monitor.detections import Detection, DetectionError
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import actions

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import monitor_fabric as fabrics  # noqa: E402  pylint: disable=wrong-import-position

IDX = fabrics.index()
PLAN = fabrics.plan()
T0 = 2000 * 60.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def append(path, text):
    with open(path, "a") as f:
        f.write(text)


# -- FileTail ------------------------------------------------------------------------------------
def test_tail_waits_for_the_end_of_a_partial_last_line(tmp_path):
    p = str(tmp_path / "ev.jsonl")
    append(p, "old\n")
    t = live.FileTail(p, "end")
    assert t.poll() == []                      # start at end: the old line is skipped
    append(p, "one\ntw")
    assert t.poll() == ["one"]                 # "tw" has no newline yet
    append(p, "o\n")
    assert t.poll() == ["two"]
    assert t.stats["lines"] == 2


def test_tail_reads_the_rest_of_a_rotated_file_then_the_new_one(tmp_path):
    p = str(tmp_path / "ev.jsonl")
    append(p, "")
    t = live.FileTail(p, "beginning")
    append(p, "a\n")
    assert t.poll() == ["a"]
    append(p, "b\n")
    os.replace(p, p + ".1")                    # the agent's rotation: rename, then a new file
    assert t.poll() == ["b"]                   # new file not there yet: the old one is still read
    append(p + ".1", "c\n")                    # a late write to the renamed file
    append(p, "d\n")
    assert t.poll() == ["c", "d"]              # the old file to its end first, then the new one
    assert t.stats["rotations"] == 1
    append(p, "e\n")
    assert t.poll() == ["e"]


def test_tail_starts_over_after_truncation_and_reads_a_file_that_appears_later(tmp_path):
    p = str(tmp_path / "ev.jsonl")
    t = live.FileTail(p, "end")
    assert t.poll() == [] and not t.present and "No such file" in t.error
    append(p, "first\nsecond\n")               # appeared after the start: new lines, read from its start
    assert t.poll() == ["first", "second"]
    with open(p, "w") as f:
        f.write("x\n")                         # truncated (copytruncate) and rewritten shorter
    assert t.poll() == ["x"] and t.stats["truncations"] == 1


def test_tail_drops_an_over_long_line_and_keeps_reading(tmp_path):
    p = str(tmp_path / "ev.jsonl")
    append(p, "")
    t = live.FileTail(p, "beginning", max_line=100)
    append(p, "y" * 150)
    assert t.poll() == []
    append(p, "y" * 50 + "\nnext\n")
    assert t.poll() == ["next"] and t.stats["dropped_long"] == 1


def test_tail_rejects_a_bad_start_point(tmp_path):
    with pytest.raises(live.LiveError, match="start_at.*'middle'.*Fix: use end or beginning"):
        live.FileTail(str(tmp_path / "x"), "middle")


# -- lines ---------------------------------------------------------------------------------------
AGENT_EVENT = {"time": T0 + 5, "source": "fabric_monitor", "kind": "probe_loss", "scope": "path", "host": "z1r2h3",
               "rack": "z1r2", "zone": "z1", "nic": "eth1", "slot": None, "target": "z1r1",
               "target_host": "z1r1h1", "value": 0.3, "detail": ""}


def test_parse_line_reads_agent_events_and_detection_records_and_rejects_the_rest():
    dets = live.parse_line(json.dumps(AGENT_EVENT), IDX)
    assert [(d.kind, d.host, d.nic, d.target, d.value) for d in dets] == [("path_loss", "z1r2h3", 2, "z1r1h1", 0.3)]
    rec = Detection.make(T0, "nic_out", host="z1r1h1", nic=1, source="watcher")
    assert live.parse_line(json.dumps(rec.to_dict())) == [rec]
    assert live.parse_line("   ") == []
    assert live.parse_line(json.dumps(dict(AGENT_EVENT, kind="egress_in"))) == []   # a recovery
    unknown_key = '{"time": 1, "kind": "path_loss", "hots": "x", "source": "p"}'
    for bad, needle in (("{not json", "not JSON"), (unknown_key, "hots: unknown key"),
                        (json.dumps(dict(AGENT_EVENT, kind="probe_los")), "unknown agent event kind")):
        with pytest.raises(DetectionError, match=needle):
            live.parse_line(bad, IDX, "h1")


def test_agent_down_from_prometheus_answer():
    answer = {"status": "success", "data": {"result": [{"metric": {"host": "z1r1h2"}, "value": [1, "1"]}]}}
    assert [(d.kind, d.host, d.time) for d in live.agent_down_detections(answer, T0)] == [("agent_down", "z1r1h2", T0)]
    with pytest.raises(ValueError):
        live.agent_down_detections({"status": "error"}, T0)


def test_agent_down_query_over_http():
    import http.server
    import threading
    answers = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802  pylint: disable=invalid-name
            answers.append(self.path)
            code, body = (200, {"status": "success", "data": {"result": [{"metric": {"host": "z1r2h1"}}]}}) \
                if "agent_down" in self.path and len(answers) == 1 else (503, {"status": "error"})
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # pylint: disable=arguments-differ
            pass
    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        url = "http://127.0.0.1:%d/" % srv.server_address[1]
        assert [d.host for d in live._query_agent_down(url, T0)] == ["z1r2h1"]  # pylint: disable=protected-access
        with pytest.raises(ValueError, match="HTTP 503"):
            live._query_agent_down(url, T0)  # pylint: disable=protected-access
    finally:
        srv.shutdown()
        srv.server_close()
    assert answers[0] == "/api/v1/query?query=fabric_monitor%3Aagent_down"
    with pytest.raises(ValueError, match="not an http"):
        live._query_agent_down("ftp://x", T0)  # pylint: disable=protected-access


# -- one round -----------------------------------------------------------------------------------
def sim_detections(faults, until, t_start=T0 - 60):
    return list(Simulator(IDX, seed=3).stream(faults, until, t_start=t_start))


def make_live(tmp_path, hosts, **kw):
    d = tmp_path / "events"
    d.mkdir(exist_ok=True)
    sources = {}
    for h in hosts:
        p = str(d / ("%s.jsonl" % h))
        append(p, "")
        sources[h] = p
    lv = live.Live(IDX, sources, str(tmp_path / "mon" / "cases.jsonl"), str(tmp_path / "mon" / "cases.json"), **kw)
    return lv, sources


def write_dets(sources, dets):
    """Each detection to the events file of its host (the agent's side); ToR/spine ones to the first file."""
    first = sorted(sources)[0]
    for det in dets:
        append(sources.get(det.host, sources[first]), json.dumps(det.to_dict()) + "\n")


def run(lv, sources, dets, t_from, t_to, step=5.0, bad_every=0):
    """Feed ``dets`` to the files as wall time goes from t_from to t_to, one round every ``step`` s."""
    events = []
    pending = sorted(dets, key=lambda d: d.time)
    t = t_from
    i = 0
    n = 0
    while t <= t_to:
        batch = []
        while i < len(pending) and pending[i].time <= t:
            batch.append(pending[i])
            i += 1
        # inside one round the files are written in reverse time order: the order must not matter
        write_dets(sources, reversed(batch))
        n += 1
        if bad_every and n % bad_every == 0:
            append(sources[sorted(sources)[n % len(sources)]], '{"half a line\n')
        events.extend(lv.step(t))
        t += step
    return events


def hosts_of(dets):
    return sorted({d.host for d in dets if d.host} | {"z1r1h1"})


def test_a_nic_fault_gives_open_then_closed_lines_and_the_same_case_as_batch_correlation(tmp_path):
    fault = Fault("nic", T0, T0 + 300, host="z1r2h3", nic=2)
    dets = sim_detections([fault], T0 + 400)
    lv, sources = make_live(tmp_path, hosts_of(dets))
    events = run(lv, sources, dets, T0 - 60, T0 + 1100, bad_every=7)
    lv.close(T0 + 1100)
    states = [(e["case"]["state"], e["case"]["scope"]["id"]) for e in events]
    assert states[0] == ("open", "z1r2h3/nic2") and states[-1] == ("closed", "z1r2h3/nic2")
    assert set(states) <= {("open", "z1r2h3/nic2"), ("updated", "z1r2h3/nic2"), ("closed", "z1r2h3/nic2")}
    assert [s for s, _i in states].count("open") == 1 and [s for s, _i in states].count("closed") == 1
    # the case file holds exactly those lines, each one the EDA source accepts
    with open(lv.case_file) as f:
        lines = [json.loads(x) for x in f]
    assert lines == events
    for line in lines:
        case = actions.check_case(line)
        assert actions.plan_action(case)["action"] in ("drain", "none")
    assert lines[0]["case"]["scope"]["nic"] == 1      # plan index of NIC 2 (what drain.yml takes)
    # time to detect: the open line was written within window + slack (+ one round) of the first detection
    opened = lines[0]["case"]["opened_at"]
    assert opened - fault.start <= 90 + 5
    # the same case as the batch form, same detections
    batch, _stats = correlate(dets, IDX)
    assert [(c["scope"]["id"], c["detections"]) for c in batch] == [("z1r2h3/nic2", lines[-1]["case"]["detections"])]
    # bad lines were counted per source, never fed and never fatal
    with open(lv.snapshot_path) as f:
        snap = json.load(f)
    assert sum(s["bad_lines"] for s in snap["sources"].values()) == (len(range(int((1100 + 60) / 5) + 1)) // 7)
    assert snap["open"] == [] and [c["id"] for c in snap["closed"]] == [lines[0]["case"]["id"]]
    assert snap["stats"]["detections"] == len(dets)


def test_no_fault_no_case_line_and_the_snapshot_is_a_heartbeat(tmp_path):
    dets = list(Simulator(IDX, seed=5).stream([], T0 + 600, noise=3, t_start=T0))
    lv, sources = make_live(tmp_path, hosts_of(dets), heartbeat=10.0)
    events = run(lv, sources, dets, T0, T0 + 600)
    assert events == [] and os.path.getsize(lv.case_file) == 0
    with open(lv.snapshot_path) as f:
        snap = json.load(f)
    assert snap["open"] == [] and snap["updated_at"] >= T0 + 590
    assert lv.corr.stats["detections"] == len(dets) > 0


def test_a_nic_case_absorbed_by_its_tor_case_gets_a_closed_line(tmp_path):
    faults = [Fault("nic", T0, T0 + 600, host="z1r2h3", nic=2), Fault("tor", T0 + 240, T0 + 600, tor="z1r2-tor")]
    dets = sim_detections(faults, T0 + 700)
    lv, sources = make_live(tmp_path, hosts_of(dets))
    events = run(lv, sources, dets, T0 - 60, T0 + 1400)
    by_id = {}
    for e in events:
        by_id.setdefault(e["case"]["id"], []).append(e["case"]["state"])
    nic = [i for i in by_id if i.startswith("z1r2h3/nic2@")]
    tor = [i for i in by_id if i.startswith("z1r2-tor@")]
    assert nic and tor, by_id
    assert by_id[nic[0]][0] == "open" and by_id[nic[0]][-1] == "closed"
    snap = lv.current(T0 + 1400)
    absorbed = [c for c in snap["closed"] if c["id"] == nic[0]]
    assert absorbed and absorbed[0]["absorbed_into"] == tor[0]
    tor_lines = [e["case"] for e in events if e["case"]["id"] == tor[0]]
    assert nic[0] in tor_lines[-1]["absorbed"]


def test_a_restart_closes_what_the_last_snapshot_had_open(tmp_path):
    fault = Fault("nic", T0, T0 + 900, host="z1r2h3", nic=2)
    dets = sim_detections([fault], T0 + 300)
    lv, sources = make_live(tmp_path, hosts_of(dets))
    run(lv, sources, dets, T0 - 60, T0 + 300)
    lv.close(T0 + 300)
    open_id = lv.current(T0 + 300)["open"][0]["id"]
    again = live.Live(IDX, sources, lv.case_file, lv.snapshot_path, clock=lambda: T0 + 400)
    again.close(T0 + 400)
    with open(lv.case_file) as f:
        last = json.loads(f.readlines()[-1])["case"]
    assert (last["id"], last["state"]) == (open_id, "closed")
    with open(lv.snapshot_path) as f:
        snap = json.load(f)
    assert snap["open"] == [] and snap["closed"][0]["ended_by"] == "correlator restart"


def test_bad_settings_name_the_field_and_write_nothing(tmp_path):
    out = tmp_path / "mon"
    with pytest.raises(live.LiveError) as err:
        live.Live(IDX, {}, str(out / "c.jsonl"), "", recent=-1)
    text = str(err.value)
    assert "events: no events file to read" in text and "recent: expected seconds > 0 (value: -1)" in text
    assert "snapshot: a file path is required" in text
    assert not out.exists()
    with pytest.raises(live.LiveError, match="topology.*cannot read it"):
        live.load_index(str(tmp_path / "missing.json"))


def test_index_data_keeps_only_what_correlation_reads_and_loads_back(tmp_path):
    data = live.index_data([PLAN.rack_data(r) for r in PLAN.topo.racks], [PLAN.spine_data(s) for s in PLAN.topo.spines])
    text = json.dumps(data)
    assert "fd00" not in text and "asn" not in text        # no address, no ASN, no key
    p = tmp_path / "topology.json"
    p.write_text(text)
    idx = live.load_index(str(p))
    assert idx.tor_port("z1r2h3", 2) == IDX.tor_port("z1r2h3", 2) and set(idx.hosts) == set(IDX.hosts)


# -- the program ---------------------------------------------------------------------------------
def program(tmp_path, *extra):
    code = ("import sys; sys.path.insert(0, %r); "
            "from ansible_collections.netscale.multinic.plugins.module_utils.monitor import live; "
            "sys.exit(live.main(sys.argv[1:]))" % os.path.join(ROOT, ".build"))
    return [sys.executable, "-c", code] + list(extra)


def test_program_refuses_bad_arguments_and_writes_nothing(tmp_path):
    topo = tmp_path / "topology.json"
    topo.write_text(json.dumps(live.index_data([PLAN.rack_data(r) for r in PLAN.topo.racks])))
    p = subprocess.run(program(tmp_path, "--topology", str(topo), "--events", "x=", "--case-file",
                               str(tmp_path / "o" / "c.jsonl"), "--snapshot", str(tmp_path / "o" / "c.json"),
                               "--options", '{"window": 0}'), capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 2
    assert "--events: expected NAME=PATH" in p.stderr and "window" in p.stderr and "Fix:" in p.stderr
    assert not (tmp_path / "o").exists()


def test_program_stops_cleanly_on_sigterm(tmp_path):
    topo = tmp_path / "topology.json"
    topo.write_text(json.dumps(live.index_data([PLAN.rack_data(r) for r in PLAN.topo.racks])))
    ev = tmp_path / "h1.jsonl"
    ev.write_text("")
    snap = tmp_path / "o" / "cases.json"
    proc = subprocess.Popen(program(tmp_path, "--topology", str(topo), "--events", "z1r1h1=%s" % ev, "--case-file",
                                    str(tmp_path / "o" / "cases.jsonl"), "--snapshot", str(snap), "--interval", "0.2"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while not snap.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        append(str(ev), "garbage\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if json.loads(snap.read_text())["sources"]["z1r1h1"]["bad_lines"] == 1:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=20)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert "stopped (signal 15)" in out and "bad line #1 from z1r1h1" in out
    data = json.loads(snap.read_text())
    assert data["sources"]["z1r1h1"]["bad_lines"] == 1 and data["open"] == []


def test_an_engine_error_is_counted_and_correlation_goes_on(tmp_path):
    fault = Fault("nic", T0, T0 + 300, host="z1r2h3", nic=2)
    dets = sim_detections([fault], T0 + 400)
    logged = []
    lv, sources = make_live(tmp_path, hosts_of(dets), log=logged.append)
    real = lv.corr.feed
    calls = []

    def flaky(det):
        calls.append(det)
        if len(calls) == 3:
            raise TypeError("a defect")
        return real(det)
    lv.corr.feed = flaky
    events = run(lv, sources, dets, T0 - 60, T0 + 1100)
    assert lv.engine_errors == 1 and "correlation error #1" in logged[0] and "TypeError: a defect" in logged[0]
    assert [e["case"]["state"] for e in events][0] == "open" and events[-1]["case"]["state"] == "closed"
    assert lv.current(T0 + 1100)["engine_errors"] == 1
