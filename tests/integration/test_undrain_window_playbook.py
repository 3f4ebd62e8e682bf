"""playbooks/undrain.yml's clean probe window through Ansible itself, on the controller only (no lab): a stand-in
Prometheus (http.server in this process, on a loopback port) serves the agents' counters; the NIC is drained in the
journal. Refusals (Prometheus unreachable, loss, the window not elapsed) stop before any host is contacted and are
journaled with the verdict; check mode shows an allowed verdict; the operator's consent is journaled as skipped."""
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import budget as B  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.remediate import journal as J  # noqa: E402

ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_STDOUT_CALLBACK="default", PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
INVENTORY = os.path.join(ROOT, "inventories", "example", "fabric.yml")
HOST = "gpu-b1-az1-r1-h1"
NIC_ARGS = ["-e", "drain_scope=nic", "-e", "drain_host=%s" % HOST, "-e", "drain_nic=1"]
# the controller's plays only: localhost made explicit (so --limit matches it) with the test's Python
LOCAL_ONLY = ["-i", "localhost,", "--limit", "localhost", "-e", "ansible_python_interpreter=%s" % sys.executable]
FAST = ["-e", "drain_clean_window=60", "-e", json.dumps({"drain_clean_window_settings": {"step": 5, "max_gap": 15}})]


class Prom(object):
    """A stand-in for Prometheus' query_range: eth1's counters to two targets, ``lost_per_step`` lost each step."""

    def __init__(self):
        self.lost_per_step = 0
        self.queries = []
        prom = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                u = urlparse(self.path)
                q = dict((k, v[0]) for k, v in parse_qs(u.query).items())
                prom.queries.append(q)
                start, end, step = float(q["start"]), float(q["end"]), float(q["step"])
                lost = "lost_total" in q["query"]
                result = []
                for target in ("gpu-b1-az1-r1-h2", "storage"):
                    values, t, v = [], start, 1000.0
                    while t <= end:
                        values.append([t, str(v)])
                        v += prom.lost_per_step if lost else 6
                        t += step
                    result.append({"metric": {"host": HOST, "nic": "eth1", "target": target}, "values": values})
                body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                return

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def prom():
    p = Prom()
    yield p
    p.close()


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _drained(journal, ago):
    """The journal as after a drain of NIC 1 ``ago`` seconds ago."""
    plan = load_plan(INVENTORY)
    fab = B.FabricView.from_topology(plan.topo)
    r = B.resolve(fab, "nic", host=HOST, nic=1)
    r.update(action="drain", automatic=False)
    jr = J.DrainJournal(str(journal), plan.topo.name)
    rec = jr.decide(fab, r, now=time.time() - ago, job="drain-test")
    assert rec["allowed"]
    jr.outcome("drain", rec["element"], True, job="drain-test", now=time.time() - ago + 5)
    return jr


def _play(journal, *extra):
    return subprocess.run(["ansible-playbook", "-i", INVENTORY, os.path.join(ROOT, "playbooks", "undrain.yml"),
                           "-e", "drain_journal_dir=%s" % journal,
                           "-e", "rollout_journal_dir=%s" % os.path.join(os.path.dirname(str(journal)), "rollouts")]
                          + NIC_ARGS + FAST + list(extra), cwd=ROOT, env=ENV, capture_output=True, text=True,
                          check=False)


def _last_decision(jr):
    return [r for r in jr.records() if r["type"] == "decision"][-1]


def test_prometheus_unreachable_refuses_and_journals_the_verdict(tmp_path):
    journal = tmp_path / "journal"
    jr = _drained(journal, ago=600)
    before = jr.records()
    run = _play(journal, "-e", "drain_prometheus_url=http://127.0.0.1:%d" % _free_port())
    assert run.returncode != 0
    assert "undrain nic:%s:1: REFUSED by the blast-radius budget: the probe window is not clean" % HOST in run.stdout
    assert "NO EVIDENCE" in run.stdout and "could not be read" in run.stdout and "Fix: make the evidence whole" in run.stdout
    assert "PLAY RECAP" in run.stdout and HOST not in run.stdout.split("PLAY RECAP")[-1]   # the host play never ran
    d = _last_decision(jr)
    assert (d["action"], d["allowed"], d["window"]["verdict"]) == ("undrain", False, "no_evidence")
    assert jr.records()[:len(before)] == before and len(jr.records()) == len(before) + 1   # one decision, no outcome
    assert "nic:%s:1" % HOST in jr.state()


def test_loss_refuses_not_clean(tmp_path, prom):
    journal = tmp_path / "journal"
    jr = _drained(journal, ago=600)
    prom.lost_per_step = 1
    run = _play(journal, "-e", "drain_prometheus_url=%s" % prom.url)
    assert run.returncode != 0 and "NOT CLEAN" in run.stdout and "NIC eth1 lost probes in" in run.stdout
    assert _last_decision(jr)["window"]["verdict"] == "not_clean"
    assert any('nic=~"eth1"' in q["query"] and 'host="%s"' % HOST in q["query"] for q in prom.queries)


def test_window_not_elapsed_since_the_drain_refuses(tmp_path, prom):
    journal = tmp_path / "journal"
    jr = _drained(journal, ago=10)
    run = _play(journal, "-e", "drain_prometheus_url=%s" % prom.url)
    assert run.returncode != 0 and "window not yet elapsed" in run.stdout
    assert _last_decision(jr)["window"]["verdict"] == "no_evidence" and "nic:%s:1" % HOST in jr.state()


def test_clean_window_allows_in_check_mode_nothing_journaled(tmp_path, prom):
    journal = tmp_path / "journal"
    jr = _drained(journal, ago=600)
    before = jr.records()
    run = _play(journal, "-e", "drain_prometheus_url=%s" % prom.url, "--check", *LOCAL_ONLY)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "clean window of nic:%s:1: CLEAN (60 s, eth1 0/" % HOST in run.stdout
    assert "undrain nic:%s:1: allowed" % HOST in run.stdout
    assert jr.records() == before


def test_operator_consent_skips_the_window_and_automatic_never_does(tmp_path):
    journal = tmp_path / "journal"
    jr = _drained(journal, ago=5)
    skip = ["-e", "drain_undrain_without_clean_window=true", "-e",
            json.dumps({"drain_reason": "NIC replaced, checked by hand"})]
    run = _play(journal, *(skip + ["--check", *LOCAL_ONLY]))
    assert run.returncode == 0, run.stdout[-3000:]
    flat = " ".join(run.stdout.split()).replace("''", "'")   # the YAML callback folds and quotes messages
    assert "SKIPPED with the operator's consent (NIC replaced, checked by hand)" in flat
    auto = _play(journal, *(skip + ["-e", "drain_case=c-42"]))
    assert auto.returncode != 0 and "the remediation never undrains without a clean window" in auto.stdout
    assert [r["type"] for r in jr.records()] == ["decision", "outcome"]
