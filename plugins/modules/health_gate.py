# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: health_gate
short_description: Evaluate a rollout health gate (measurement, condition, interval, count, limits)
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs one health gate in the manner of an Argo Rollouts analysis. The gate measures O(count) times,
    O(interval) seconds apart; each measurement is V(successful) (O(success_condition) holds), V(failed)
    (O(failure_condition) holds, or no failure condition and the success condition does not), V(inconclusive)
    (neither holds) or V(error) (no data).
  - "Verdict: V(fail) once failures exceed O(failure_limit); V(inconclusive) once inconclusive measurements exceed
    O(inconclusive_limit) or consecutive errors exceed O(error_limit); V(pass) early after O(success_threshold)
    consecutive successes, or after all measurements when at least O(min_successful) of them succeeded; fewer is
    V(inconclusive) (a gate never passes on missing evidence)."
  - Built-in gates (O(gate)) know their measurement and defaults; V(custom) takes any command printing a JSON object
    or already-measured O(data) plus a O(success_condition).
  - The module runs where the measurement is (a ToR or spine for FRR state, a GPU host for sidecar status,
    datapath state and ping probes). Measurements are read-only; the module never changes anything.
options:
  gate:
    description:
      - V(bgp_sessions) every host NIC's session (one per task slot and NIC) Established on the ToR (source V(frr)).
      - V(ecmp_width) ToR FIB next hops per task IP = the host's NIC count (source V(frr)).
      - V(spine_task_routes) no route inside a rack aggregate on a spine (source V(frr)).
      - V(nic_shares) per-NIC byte share of a traffic probe within a tolerance of 1/N, both directions
        (source V(values), a C(netscale.multinic.lab_probe) result).
      - V(probe_loss) loss of a ping probe (source V(ping)).
      - V(sidecars) every VipInjector instance healthy (source V(vipinjector)).
      - V(nics_in_service) every NIC of the host in service. Source V(datapath) (on the host) - admin up with
        carrier, and in the host's egress set (kernel mode its own default route in its table and a member of
        the fallback multipath routes, eBPF mode its C(mn_nics) entry without the NIC_OUT flag); source V(frr)
        (on the ToR) - the BFD session of every slot on the NIC up (C(show bfd peers json)). Evidence that cannot
        be read counts the NIC out of service.
      - V(custom) O(success_condition) over the values of O(command) or O(data).
    type: str
    required: true
    choices: [bgp_sessions, ecmp_width, spine_task_routes, nic_shares, probe_loss, sidecars, nics_in_service, custom]
  name:
    description: Name of this gate in results and reports (default O(gate)).
    type: str
  source:
    description:
      - Where the values come from. V(frr) runs O(vtysh) here; V(vipinjector) reads the status files under
        O(runtime_dir); V(datapath) reads the host datapath's state (O(state_dir), C(ip -j), C(bpftool));
        V(ping) runs ping (O(ping)); V(command) runs O(command), which prints a JSON object;
        V(values) uses O(data) as measured (it is evaluated once).
      - Default per gate (V(frr), V(frr), V(frr), V(values), V(ping), V(vipinjector), V(datapath), V(command)).
    type: str
    choices: [frr, vipinjector, datapath, ping, command, values]
  data:
    description: Recorded input for O(source=values) (FRR JSON, a lab_probe result, ping output, status per slot) or,
      for O(gate=custom), the values themselves.
    type: raw
  hosts:
    description: Planner host data (inventory variable C(multinic_host)) of the hosts under test.
    type: list
    elements: dict
    default: []
  rack_prefixes:
    description: Rack aggregates (V(spine_task_routes)); default none.
    type: list
    elements: str
    default: []
  slots:
    description: Task slots to check (V(sidecars)); default every slot of the single host in O(hosts).
    type: list
    elements: int
  session_family:
    description: Transport of the sidecar sessions; V(auto) = IPv6 when planned.
    type: str
    choices: [auto, ipv6, ipv4]
    default: auto
  state_dir:
    description: State directory of the host datapath (C(datapath.json); source V(datapath)).
    type: path
    default: /var/lib/netscale-multinic
  bpffs_root:
    description: bpffs mount point the eBPF datapath pins its maps under (source V(datapath)).
    type: path
    default: /sys/fs/bpf
  vtysh:
    description: vtysh command line (e.g. with C(--vty_socket DIR) for an FRR instance in its own run dir).
    type: list
    elements: str
    default: [vtysh]
  ping:
    description: Ping probe for V(probe_loss).
    type: dict
    suboptions:
      target:
        description: Address to ping (lab storage node, or any peer of the workload).
        type: str
        required: true
      netns:
        description: Network namespace on this host to ping from (e.g. the workload namespace C(mn-slot1)).
        type: str
      count:
        description: Echo requests.
        type: int
        default: 20
      interval:
        description: Seconds between requests.
        type: float
        default: 0.05
      timeout:
        description: Seconds to wait for the last reply.
        type: int
        default: 2
  command:
    description: Command (argv) printing a JSON object of values (source V(command)).
    type: list
    elements: str
  success_condition:
    description: Expression over the values and O(params), e.g. C(established == expected). Required for V(custom).
    type: str
  failure_condition:
    description: Optional expression; when given, a measurement matching neither condition is inconclusive.
    type: str
  params:
    description: Thresholds visible to the conditions (merged over the gate's defaults, e.g. C(share_tolerance),
      C(max_loss_percent), C(max_task_routes)).
    type: dict
    default: {}
  interval:
    description: Seconds between measurements (default per gate).
    type: float
  count:
    description: Number of measurements (default per gate).
    type: int
  failure_limit:
    description: Failed measurements tolerated (default per gate).
    type: int
  inconclusive_limit:
    description: Inconclusive measurements tolerated.
    type: int
  error_limit:
    description: Consecutive measurement errors tolerated.
    type: int
  success_threshold:
    description: Pass early after this many consecutive successes (0 = run all measurements).
    type: int
  min_successful:
    description:
      - Successful measurements a pass needs. Default the O(success_threshold) streak, else every measurement
        O(failure_limit) does not excuse (all of O(count) with the default failure limit 0). Measurements that
        produced no data (errors) never count toward a pass; too few successes is V(inconclusive).
    type: int
  initial_delay:
    description: Seconds to wait before the first measurement.
    type: float
  fail_on:
    description: Verdicts that make the task fail. Empty to always return the verdict (the health_gates role does
      that and decides itself).
    type: list
    elements: str
    choices: [fail, inconclusive]
    default: [fail, inconclusive]
attributes:
  check_mode:
    support: full
    description: Measurements are read-only; the gate runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    support: full
    description: Linux (FRR C(vtysh), iputils C(ping), iproute2 C(ip), C(bpftool), VipInjector status files).
    platforms: posix
notes:
  - Gate results (values, every measurement, verdict, reason, timings) are what the rollout report shows.
extends_documentation_fragment:
  - netscale.multinic.vipinjector_runtime
"""

EXAMPLES = r"""
- name: Every sidecar session of the wave's hosts is Established on this ToR
  netscale.multinic.health_gate:
    gate: bgp_sessions
    hosts: "{{ ansible_play_batch | map('extract', hostvars, 'multinic_host') | list }}"
  delegate_to: "{{ multinic_host.tor }}"

- name: Per-NIC shares of a probe within 5 points of 1/N
  netscale.multinic.health_gate:
    gate: nic_shares
    data: "{{ probe }}"
    hosts: ["{{ multinic_host }}"]
    params:
      share_tolerance: 0.05

- name: Every NIC of this host in service (link, egress set)
  netscale.multinic.health_gate:
    gate: nics_in_service
    hosts: ["{{ multinic_host }}"]

- name: The BFD session of every slot on every NIC of this host up on its ToR
  netscale.multinic.health_gate:
    gate: nics_in_service
    source: frr
    hosts: ["{{ multinic_host }}"]
  delegate_to: "{{ multinic_host.tor }}"

- name: A custom gate over a command's JSON output
  netscale.multinic.health_gate:
    gate: custom
    name: conntrack_headroom
    command: [/usr/local/bin/conntrack-stats, --json]
    success_condition: used / max < 0.8
    count: 5
    interval: 2
"""

RETURN = r"""
gate:
  description: Gate name.
  returned: always
  type: str
verdict:
  description: V(pass), V(fail) or V(inconclusive).
  returned: always
  type: str
  sample: pass
passed:
  description: Verdict is V(pass).
  returned: always
  type: bool
reason:
  description: Why (limits crossed, last detail).
  returned: always
  type: str
values:
  description: Values of the last successful measurement (what the condition saw), with C(detail) naming offenders.
  returned: always
  type: dict
  sample: {expected: 8, established: 7, not_established: 1,
           detail: [{host: lab-r1-h2, slot: 1, nic: eth2, neighbor: "fd00:10:0:a::4", state: Connect}]}
measurements:
  description: Every measurement (index, time, phase, detail, values).
  returned: always
  type: list
  elements: dict
counts:
  description: Measurements per phase.
  returned: always
  type: dict
evidence:
  description: What the verdict rests on - measurements taken, successful ones, successes a pass needs, errors.
  returned: always
  type: dict
  sample: {measurements: 3, successful: 3, required_successes: 3, errors: 0}
limits:
  description: count, interval and limits used.
  returned: always
  type: dict
seconds:
  description: Wall time of the gate.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.netscale.multinic.plugins.module_utils.gates import builtin, engine, measure


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gate=dict(type="str", required=True, choices=list(builtin.GATES) + ["custom"]),
            name=dict(type="str"),
            source=dict(type="str", choices=["frr", "vipinjector", "datapath", "ping", "command", "values"]),
            data=dict(type="raw"),
            hosts=dict(type="list", elements="dict", default=[]),
            rack_prefixes=dict(type="list", elements="str", default=[]),
            slots=dict(type="list", elements="int"),
            session_family=dict(type="str", choices=["auto", "ipv6", "ipv4"], default="auto"),
            vtysh=dict(type="list", elements="str", default=["vtysh"]),
            runtime_dir=dict(type="path", default="/run/netscale-vipinjector"),
            state_dir=dict(type="path", default="/var/lib/netscale-multinic"),
            bpffs_root=dict(type="path", default="/sys/fs/bpf"),
            ping=dict(type="dict", options=dict(
                target=dict(type="str", required=True),
                netns=dict(type="str"),
                count=dict(type="int", default=20),
                interval=dict(type="float", default=0.05),
                timeout=dict(type="int", default=2),
            )),
            command=dict(type="list", elements="str"),
            success_condition=dict(type="str"),
            failure_condition=dict(type="str"),
            params=dict(type="dict", default={}),
            interval=dict(type="float"),
            count=dict(type="int"),
            failure_limit=dict(type="int"),
            inconclusive_limit=dict(type="int"),
            error_limit=dict(type="int"),
            success_threshold=dict(type="int"),
            min_successful=dict(type="int"),
            initial_delay=dict(type="float"),
            fail_on=dict(type="list", elements="str", choices=["fail", "inconclusive"],
                         default=["fail", "inconclusive"]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    gate = p["gate"]
    source = p["source"] or measure.DEFAULT_SOURCE[gate]
    problems = []
    if gate == "custom" and not p["success_condition"]:
        problems.append("gate=custom needs success_condition (an expression over the measured values)")
    if source == "values" and p["data"] is None:
        problems.append("source=values needs data (the recorded input of gate %s)" % gate)
    if source == "command" and not p["command"]:
        problems.append("source=command needs command (argv printing a JSON object)")
    if source == "ping" and not p["ping"]:
        problems.append("source=ping needs ping.target (e.g. the lab storage address)")
    if gate in ("bgp_sessions", "ecmp_width", "nics_in_service") and not p["hosts"]:
        problems.append("gate=%s needs hosts (the multinic_host data of the hosts under test)" % gate)
    if gate == "nics_in_service" and source not in ("datapath", "frr", "values"):
        problems.append("gate=nics_in_service: source=%s cannot measure it; use datapath (on the host) or frr "
                        "(BFD sessions, on the ToR)" % source)
    if source == "datapath" and gate != "nics_in_service":
        problems.append("source=datapath measures gate nics_in_service only, not %s" % gate)
    if gate == "nics_in_service" and source == "datapath" and len(p["hosts"]) > 1:
        problems.append("gate=nics_in_service with source=datapath reads this host's own state: pass hosts with "
                        "exactly this host (got %d)" % len(p["hosts"]))
    if gate == "spine_task_routes" and not p["rack_prefixes"]:
        problems.append("gate=spine_task_routes needs rack_prefixes (the spine's rack aggregates)")
    slots = p["slots"]
    if gate == "sidecars" and not slots:
        if len(p["hosts"]) == 1:
            slots = [s["slot"] for s in p["hosts"][0].get("slots") or []]
        if not slots:
            problems.append("gate=sidecars needs slots, or hosts with exactly one host whose slots are used")
    if problems:
        module.fail_json(msg="health_gate %s: %s" % (p["name"] or gate, "; ".join(problems)), problems=problems)

    if gate == "custom":
        d = {"description": "custom gate", "success_condition": p["success_condition"], "params": {},
             "interval": 1.0, "count": 1, "failure_limit": 0, "success_threshold": None}
        overrides = {}
    else:
        d = builtin.definition(gate)
        overrides = {}
    for k in ("success_condition", "interval", "count", "failure_limit", "success_threshold", "min_successful"):
        if p[k] is not None:
            overrides[k] = p[k]
    d.update(overrides)
    d["params"].update(p["params"] or {})
    if d.get("success_threshold") == 0:
        d["success_threshold"] = None
    if source == "values":
        # Recorded input does not change between measurements: one measurement decides.
        d["count"] = 1
        d["success_threshold"] = None
        d["min_successful"] = None

    def run(argv):
        return module.run_command(argv)

    measure_fn = measure.measurement(
        gate, source, run=run, hosts=p["hosts"], rack_prefixes=p["rack_prefixes"],
        session_family=p["session_family"], slots=slots, vtysh=p["vtysh"], runtime_dir=p["runtime_dir"],
        ping=p["ping"], command=p["command"], data=p["data"], state_dir=p["state_dir"], bpffs_root=p["bpffs_root"])
    try:
        spec = engine.GateSpec(
            p["name"] or gate, measure_fn, d["success_condition"], failure_condition=p["failure_condition"],
            interval=float(d["interval"]), count=int(d["count"]), failure_limit=int(d["failure_limit"]),
            inconclusive_limit=p["inconclusive_limit"] if p["inconclusive_limit"] is not None else 0,
            error_limit=p["error_limit"] if p["error_limit"] is not None else 4,
            success_threshold=d.get("success_threshold"), min_successful=d.get("min_successful"),
            initial_delay=p["initial_delay"] or 0.0, params=d["params"], description=d["description"])
    except engine.GateDefinitionError as exc:
        module.fail_json(msg=str(exc))
    result = engine.run_gate(spec)
    result["changed"] = False
    result["source"] = source
    if result["verdict"] in p["fail_on"]:
        result["msg"] = "gate %s: %s (%s)" % (spec.name, result["verdict"], result["reason"])
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
