#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: lab_fabric
short_description: Build or tear down the netscale.multinic fabric lab on this machine
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Builds the embedded fabric lab from a topology file with a C(lab) section, using the planner's
    addresses; nothing is hard-coded.
  - A spine and one ToR per rack run FRR (zebra, staticd, bgpd, bfdd) in their own network, mount and UTS
    namespaces with private C(/etc/frr) and C(/var/run/frr), so C(vtysh) and C(frr-reload.py) work there
    with their default paths. Spine-ToR eBGP runs over the planned uplink addresses.
  - Every GPU host boots systemd as PID 1 in its own pid, mount, UTS, network, IPC and cgroup namespaces
    on an overlay of a cached debootstrap image (rebuilt only when its package list changes). Its NICs are
    veth pairs to its ToR, named and addressed as planned.
  - A storage node behind the spine serves traffic tests.
  - Everything created is journaled in C(<state_root>/<fabric>/state.json) as it is created;
    O(state=absent) removes all of it (processes by PID, links, namespaces, cgroups, files), and a
    build that fails midway removes what it made before failing.
  - A second build of a healthy lab changes nothing. When the topology changed only in its GPU hosts (hosts
    added or removed, a host's NIC count changed) or racks (a rack added or removed), only those hosts, ToRs
    and their links are torn down or built, and the spines get their new FRR config in place
    (frr-reload.py); every other node keeps its processes and state. A lab whose processes died, or whose
    spine set, storage, image or templates changed, is torn down and rebuilt, as is any lab with
    O(rebuild=true).
options:
  state:
    description: C(present) builds the lab (or leaves a healthy one alone), C(absent) tears it down.
    type: str
    choices: [present, absent]
    default: present
  topology:
    description: Path of the fabric topology file (with a C(lab) section).
    type: path
    required: true
  state_root:
    description: Directory of the lab state files (the inventory plugin reads the same place).
    type: path
    default: /run/netscale-multinic/lab
  tor_config_dir:
    description:
      - Directory with rendered ToR configs named C(<tor name>.cfg). When a ToR's file exists it is used
        instead of the uplink part of the ToR policy (announce the rack aggregate only), which the
        ToRs start with otherwise.
    type: path
  host_default_route:
    description: Give each GPU host an ECMP default route over all its NIC gateways (as provisioning would).
    type: bool
    default: true
  bgp_timeout:
    description: Seconds to wait for every spine-ToR session to be Established and routes to converge.
    type: float
    default: 60
  rebuild:
    description: Tear the lab down and build it again even when it is healthy or could be changed in place.
    type: bool
    default: false
  fail_at:
    description:
      - Testing aid. Make the build fail at this step (after the previous steps ran) to exercise the
        rollback. Same as the environment variable C(NETSCALE_LAB_FAIL_AT).
    type: str
    choices: [image, nodes, hosts, links, frr, bgp, ready]
attributes:
  check_mode:
    support: full
    description: Reports whether the lab would be built, rebuilt (and why) or torn down; changes nothing.
  diff_mode:
    support: full
    description: Shows the lab status before and after.
  platform:
    support: full
    platforms: posix
    description: Runs on the machine that hosts the lab (connection local, root).
notes:
  - Runs on the machine that hosts the lab, as root (use C(connection=local)).
  - Needs frr, iproute2, util-linux (unshare, nsenter), debootstrap, nftables and iperf3
    (C(scripts/setup.sh) installs them) and a cgroup v2 hierarchy.
  - Kernel objects carry the prefix C(mnl-) (namespaces C(mnl-<node>)), cgroups live under
    C(<cgroup2 mount>/mnl/<fabric>/<node>).
seealso:
  - module: netscale.multinic.lab_link
  - module: netscale.multinic.lab_daemon
  - module: netscale.multinic.lab_probe
"""

EXAMPLES = r"""
- name: Build the lab
  netscale.multinic.lab_fabric:
    topology: "{{ playbook_dir }}/../inventories/lab/fabric.yml"

- name: Tear it down
  netscale.multinic.lab_fabric:
    topology: "{{ playbook_dir }}/../inventories/lab/fabric.yml"
    state: absent
"""

RETURN = r"""
state_file:
  description: Path of the lab state file.
  returned: always
  type: str
  sample: /run/netscale-multinic/lab/lab/state.json
nodes:
  description: Lab nodes by inventory name; C(pid) is the PID to nsenter, C(kind) one of gpu_host, tor, spine, storage.
  returned: when state=present
  type: dict
  sample: {"lab-r1-h1": {"pid": 4242, "kind": "gpu_host", "netns": "mnl-lab-r1-h1"}}
reasons:
  description: Why the lab was (or would be) rebuilt.
  returned: when state=present and the lab was not healthy
  type: list
  elements: str
change:
  description:
    - What the build does (or would do in check mode). C(action) is C(build), C(rebuild) or C(in_place)
      (GPU hosts and ToRs in C(remove) and C(add), spines given their new config in C(reload)).
  returned: when state=present and the lab was not healthy or a rebuild was requested
  type: dict
  sample: {"action": "in_place", "remove": [], "add": ["lab-r2-h3"], "reload": []}
incremental:
  description: After an in-place change, the hosts and ToRs removed and added, the spines reloaded and the nodes left untouched.
  returned: when the lab was changed in place
  type: dict
  sample: {"removed_hosts": [], "added_hosts": ["lab-r2-h3"], "removed_tors": [], "added_tors": [],
           "reloaded_spines": [], "unchanged_nodes": ["lab-r1-h1"]}
removed:
  description: What teardown removed.
  returned: when something was torn down
  type: list
  elements: str
timings:
  description: Seconds per build step (image, boxes, hosts, links, frr, bgp, build) or teardown.
  returned: when something was done
  type: dict
log:
  description: Progress messages of the engine.
  returned: always
  type: list
  elements: str
"""
