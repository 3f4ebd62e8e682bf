# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: fabric_drain
short_description: Drain or undrain a NIC (or every slot) of a GPU host through its admin-drain marker
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs on the GPU host. Writes the host's admin-drain marker (C(/var/lib/netscale-multinic/admin-drain.json),
    persistent; C(plugins/module_utils/module_utils/drain_marker.py)) that the host_datapath NIC watcher and the VipInjector
    helpers read. A drained NIC leaves the host's egress set (eBPF C(NIC_OUT) / kernel per-NIC tables) whatever its
    health, and every sidecar withdraws the task IP on that NIC's BGP session, so the ToR stops sending into it; a
    drained host (O(scope=host)) has every sidecar withdraw everything. The marker holds across restarts of the
    watcher and the sidecars and across a reboot, until O(state=undrained).
  - Scope V(nic) then waits (up to O(timeout) seconds) for the watcher to publish the NIC as drained (or no longer
    drained) in its egress state; no confirmation fails the task (the marker stays as written).
  - Does not check the blast-radius budget - C(netscale.multinic.drain_budget) does, before this module runs
    (playbooks/drain.yml).
  - Fails before any change when the NIC is not one of the watcher's (bad index), when the NIC watcher has no
    gray-failure detection for it (C(host_datapath_detection) off) or its unit is not running.
options:
  state:
    description: V(drained) - out of service until undrained; V(undrained) - back (the NIC returns to the egress set
      once the watcher finds it healthy, after its hold-down).
    type: str
    choices: [drained, undrained]
    default: drained
  scope:
    description: V(nic) - one NIC (O(nic)); V(host) - every slot of the host withdrawn.
    type: str
    choices: [nic, host]
    default: nic
  nic:
    description: Plan index of the NIC (scope V(nic)).
    type: int
  marker:
    description: The admin-drain marker.
    type: path
    default: /var/lib/netscale-multinic/admin-drain.json
  runtime:
    description: The NIC watcher's runtime file (the host_datapath role writes it); its C(detect) block names the NICs.
    type: path
    default: /var/lib/netscale-multinic/runtime.json
  egress_state:
    description: The egress state the NIC watcher publishes.
    type: path
    default: /run/netscale-multinic/egress-state.json
  watcher_unit:
    description: The NIC watcher's systemd unit (must be active for a NIC drain); empty skips the check.
    type: str
    default: netscale-multinic-watcher.service
  timeout:
    description: Seconds to wait for the watcher's confirmation (scope V(nic)).
    type: float
    default: 10.0
  reason:
    description: Why (kept in the marker with the first drain).
    type: str
  job:
    description: The job that drained it (kept in the marker).
    type: str
  case:
    description: The monitoring case (kept in the marker).
    type: str
attributes:
  check_mode:
    support: full
    description: Reports the marker change and its diff; writes nothing, waits for nothing.
  diff_mode:
    support: full
    description: The marker before and after.
  platform:
    support: full
    description: GPU hosts (Linux) with the host_datapath role.
    platforms: posix
"""

EXAMPLES = r"""
- name: Drain NIC 1 (egress set and ToR)
  netscale.multinic.fabric_drain:
    scope: nic
    nic: 1
    reason: 2 % loss on eth1
"""

RETURN = r"""
marker:
  description: The marker after the change (null when nothing is drained on the host).
  returned: always
  type: dict
drained_nics:
  description: Plan indexes of the NICs drained on the host after the change.
  returned: always
  type: list
  elements: int
host_drained:
  description: Whether the whole host is drained after the change.
  returned: always
  type: bool
in_service:
  description: NICs of the host not drained (the expected ECMP width of its task IPs on the ToR; 0 when the host is drained).
  returned: always
  type: int
egress:
  description: The watcher's egress state after the change (C(out), C(drained), C(out_nics), C(updated)).
  returned: always
  type: dict
confirmed_after:
  description: Seconds from the marker write to the watcher's confirmation (scope nic, when something was written).
  returned: when confirmed
  type: float
"""

import json
import os
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils import drain_marker as mk
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write


def _json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _confirmed(egress, nic, state, since):
    """The watcher's published state shows ``nic`` drained (or not), written at or after ``since``."""
    if not isinstance(egress, dict):
        return False
    try:
        fresh = float(egress.get("updated", 0)) >= since
        drained = int(nic) in set(int(i) for i in egress.get("drained") or [])
    except (TypeError, ValueError):
        return False
    return fresh and drained == (state == "drained")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["drained", "undrained"], default="drained"),
            scope=dict(type="str", choices=["nic", "host"], default="nic"),
            nic=dict(type="int"),
            marker=dict(type="path", default=mk.ADMIN_DRAIN_FILE),
            runtime=dict(type="path", default="/var/lib/netscale-multinic/runtime.json"),
            egress_state=dict(type="path", default="/run/netscale-multinic/egress-state.json"),
            watcher_unit=dict(type="str", default="netscale-multinic-watcher.service"),
            timeout=dict(type="float", default=10.0),
            reason=dict(type="str"),
            job=dict(type="str"),
            case=dict(type="str"),
        ),
        required_if=[("scope", "nic", ("nic",))],
        supports_check_mode=True,
    )
    p = module.params
    rt = _json(p["runtime"]) or {}
    nics = ((rt.get("detect") or {}).get("nics")) or []
    names = dict((int(n["index"]), n["name"]) for n in nics)
    n_nics = len(names) or len((rt.get("bpf") or {}).get("nics") or [])
    if p["scope"] == "nic":
        if not names:
            module.fail_json(msg="fabric_drain: nic=%d: the NIC watcher has no gray-failure detection on this host (no "
                                 "detect block in %s), so nothing would keep the NIC out of the egress set. Fix: deploy "
                                 "the host_datapath role with host_datapath_detection enabled (the default); nothing was "
                                 "changed." % (p["nic"], p["runtime"]))
        if p["nic"] not in names:
            module.fail_json(msg="fabric_drain: nic=%r: the host's NICs are %s (plan indexes). Fix: use one of them; "
                                 "nothing was changed." % (p["nic"], sorted(names)))
        if p["watcher_unit"] and not module.check_mode:
            r = subprocess.run(["systemctl", "is-active", p["watcher_unit"]], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True, check=False)
            if r.stdout.strip() != "active":
                module.fail_json(msg="fabric_drain: the NIC watcher %s is %s: it would not take NIC %d out of the "
                                     "egress set. Fix: start it (systemctl start %s) or re-run the host_datapath role; "
                                     "nothing was changed." % (p["watcher_unit"], r.stdout.strip() or "unknown",
                                                               p["nic"], p["watcher_unit"]))
    raw = mk.read(p["marker"])
    if raw == {}:
        module.fail_json(msg="fabric_drain: %s is not a drain marker (unreadable or not JSON). Fix: look at it and "
                             "remove it if nothing should be drained; nothing was changed." % p["marker"])
    meta = dict((k, p[k]) for k in ("reason", "job", "case") if p[k])
    meta["since"] = round(time.time(), 3)
    want = mk.desired(raw, p["scope"], p["state"], nic=p["nic"], meta=meta)
    before = mk.text(raw) if raw is not None else ""
    after = mk.text(want) if want is not None else ""
    changed = mk.parse(raw)[:2] != mk.parse(want)[:2] or (raw is None) != (want is None)
    nics_after, host_after, dummy = mk.parse(want)
    result = dict(changed=changed, marker=want, drained_nics=sorted(nics_after), host_drained=host_after,
                  in_service=0 if host_after else max(0, n_nics - len(nics_after)))
    if module._diff:
        result["diff"] = {"before": before, "after": after if changed else before,
                          "before_header": p["marker"], "after_header": p["marker"]}
    if module.check_mode:
        result["egress"] = _json(p["egress_state"]) or {}
        module.exit_json(**result)
    t0 = time.time()
    if changed:
        if want is None:
            try:
                os.unlink(p["marker"])
            except FileNotFoundError:
                pass
        else:
            atomic_write(p["marker"], after, mode=0o644)
    if p["scope"] == "nic":
        # the watcher reads the marker every 0.1 s and rewrites its state at least once a second while a NIC is out
        since = t0 if changed else 0.0
        deadline = time.monotonic() + p["timeout"]
        while True:
            eg = _json(p["egress_state"])
            if _confirmed(eg, p["nic"], p["state"], since):
                result["egress"] = eg
                if changed:
                    result["confirmed_after"] = round(time.time() - t0, 3)
                break
            if time.monotonic() > deadline:
                module.fail_json(msg="fabric_drain: the marker %s says NIC %d (%s) is %s, but the NIC watcher did not "
                                     "confirm it in %s within %.0f s (its state: %s). Fix: look at the watcher's log "
                                     "(journalctl -u %s); the marker stays as written." % (
                                         p["marker"], p["nic"], names.get(p["nic"]), p["state"], p["egress_state"],
                                         p["timeout"], json.dumps(eg), p["watcher_unit"]), **result)
            time.sleep(0.05)
    else:
        result["egress"] = _json(p["egress_state"]) or {}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
