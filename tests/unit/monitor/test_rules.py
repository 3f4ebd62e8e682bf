"""The Prometheus side: scrape config and SLI recording rules, checked by Prometheus's own promtool."""
import json
import shutil
import subprocess

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.monitor import rules

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def _promtool(*args):
    if not shutil.which(PROMTOOL):
        pytest.fail("promtool is missing: install Debian's prometheus (bash scripts/setup.sh)")
    return subprocess.run([PROMTOOL] + list(args), capture_output=True, text=True, timeout=60, check=False)


def test_rules_and_config_pass_promtool(tmp_path):
    (tmp_path / "rules.json").write_text(rules.dump(rules.recording_rules(0.01, 10)))
    agents = [{"address": "127.0.0.1:19100", "host": "h1", "rack": "r1", "zone": "z1"}]
    frr = [{"address": "127.0.0.1:19200", "host": "tor1", "rack": "r1", "zone": "z1"},
           {"address": "127.0.0.1:19201", "host": "spine1"}]
    (tmp_path / "prometheus.json").write_text(rules.dump(rules.scrape_config(agents, frr)))
    p = _promtool("check", "rules", str(tmp_path / "rules.json"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: 17 rules found" in p.stdout
    p = _promtool("check", "config", str(tmp_path / "prometheus.json"))
    assert p.returncode == 0, p.stdout + p.stderr


def test_sli_minutes_from_synthetic_series(tmp_path):
    """promtool's rule unit tests: a NIC losing 3 of 60 probes a minute (5 %) has bad minutes, its host (4 NICs,
    1.25 %) too, a clean NIC good ones; a minute with fewer than min_probes probes does not count."""
    (tmp_path / "rules.json").write_text(rules.dump(rules.recording_rules(0.01, 10, interval="1m")))
    series = []
    for nic, lost in (("eth0", "0+3x10"), ("eth1", "0+0x10"), ("eth2", "0+0x10"), ("eth3", "0+0x10")):
        lab = 'host="h1",rack="r1",zone="z1",nic="%s",target="h2",job="fabric_monitor"' % nic
        answered = "0+57x10" if nic == "eth0" else "0+60x10"
        series.append({"series": "fabric_monitor_probes_answered_total{%s}" % lab, "values": answered})
        series.append({"series": "fabric_monitor_probes_lost_total{%s}" % lab, "values": lost})
    lab = 'host="h9",rack="r9",zone="z1",nic="eth0",target="h2",job="fabric_monitor"'
    series.append({"series": "fabric_monitor_probes_answered_total{%s}" % lab, "values": "0+2x10"})
    series.append({"series": "fabric_monitor_probes_lost_total{%s}" % lab, "values": "0+2x10"})
    tests = {"rule_files": ["rules.json"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "promql_expr_test": [
            {"expr": 'fabric_monitor:bad_minute:nic{nic="eth0"}', "eval_time": "5m",
             "exp_samples": [{"labels": 'fabric_monitor:bad_minute:nic{host="h1",nic="eth0",rack="r1",zone="z1"}',
                              "value": 1}]},
            {"expr": 'fabric_monitor:bad_minute:nic{nic="eth1"}', "eval_time": "5m",
             "exp_samples": [{"labels": 'fabric_monitor:bad_minute:nic{host="h1",nic="eth1",rack="r1",zone="z1"}',
                              "value": 0}]},
            {"expr": 'fabric_monitor:bad_minute:host{host="h1"}', "eval_time": "5m",
             "exp_samples": [{"labels": 'fabric_monitor:bad_minute:host{host="h1",rack="r1",zone="z1"}',
                              "value": 1}]},
            {"expr": 'fabric_monitor:minute:host{host="h9"}', "eval_time": "5m", "exp_samples": []},
            {"expr": 'fabric_monitor:bad_minute:zone', "eval_time": "5m",
             "exp_samples": [{"labels": 'fabric_monitor:bad_minute:zone{zone="z1"}', "value": 1}]},
        ]}]}
    (tmp_path / "tests.json").write_text(json.dumps(tests))
    p = _promtool("test", "rules", str(tmp_path / "tests.json"))
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("threshold, probes, field", [(0, 10, "loss_threshold"), (1.5, 10, "loss_threshold"),
                                                      (0.01, 0, "min_probes")])
def test_bad_sli_settings(threshold, probes, field):
    with pytest.raises(ValueError, match=field):
        rules.recording_rules(threshold, probes)
