# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin of the same name on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
module: tor_render
short_description: Render ToR and spine BGP configs (FRR, SONiC, Arista EOS) from the fabric plan
version_added: 0.1.0
author:
  - netscale network engineering (@netscale)
description:
  - Runs on the controller. Plans the fabric from the topology file and computes, per rack, the ToR's
    BGP policy (one eBGP session per task slot and host NIC from the container's per-NIC address,
    a peer-group, route-map and prefix-lists per task slot permitting exactly that slot's task IP,
    nothing sent to hosts, only the rack aggregate upstream, ECMP with multipath-relax, timers 3/9,
    GTSM, TCP-MD5 per host) and
    per spine the policy accepting only rack aggregates.
  - Writes O(dest)/configs/<device>.cfg (mode 0600, it may hold TCP-MD5 keys) and
    O(dest)/structured_configs/<device>.yml (keys redacted). Only changed files are rewritten, so a
    second run reports no change.
  - The platform comes from the topology (C(racks[].tor.platform)); templates per platform live in
    C(plugins/module_utils/templates/tor/<set>/), capabilities in C(tor_policy.PLATFORMS).
options:
  topology:
    description: Fabric topology file. Default is the host variable C(multinic_topology_file).
    type: path
  dest:
    description: The intended/ directory.
    type: path
    default: intended
  devices:
    description: ToR and spine names to render. Default is every ToR and spine of the fabric.
    type: list
    elements: str
  options:
    description:
      - Policy options, documented in docs/tor-policy.md - C(maximum_paths), C(timers), C(hop_limit),
        C(md5) (required, optional, off), C(uplink_md5) (the ToR-spine sessions, required, optional or off), C(bfd),
        C(passive), C(ipv4_transport), C(maximum_prefix),
        C(maximum_prefix_threshold), C(adj_rib_in), C(render_interfaces), C(spine_networks) and more.
    type: dict
    default: {}
  spine_networks:
    description:
      - "Extra prefixes the spines originate, per family (C({ipv4: [...], ipv6: [...]})): the C(spine_networks)
        policy option unless O(options) sets it."
    type: dict
    default: {}
  bfd_multihop_hosts:
    description:
      - Hosts whose sessions use multihop BFD, the C(bfd.multihop_hosts) policy option unless O(options) sets
        it (used when BFD is on).
      - Default (unset or null) every member of group C(gpu_hosts) whose C(host_datapath_ebpf) is false, since the
        kernel datapath decrements the TTL of single-hop BFD packets.
    type: list
    elements: str
  md5_keys_var:
    description:
      - Name of the variable holding a mapping of host name to TCP-MD5 key (from vault). Read by name so the
        keys never appear in the task's arguments or output.
      - The key of a spine's name is the key of every ToR-spine session of that spine (both ends).
    type: str
    default: tor_bgp_md5_keys
attributes:
  check_mode:
    support: full
    description:
      - Renders and compares, writes nothing. Roles run it with C(check_mode=false) so the device
        diff in check mode compares against the new intended config.
  diff_mode:
    support: none
    description: No diff output; the device diff comes from M(netscale.multinic.frr_config).
  platform:
    support: full
    description: Runs on the controller (POSIX), as an action plugin.
    platforms: posix
notes:
  - Errors on bad input list every problem with the field, the value and the fix, and nothing is written.
"""

EXAMPLES = r"""
- name: Render every ToR and spine config of the fabric
  netscale.multinic.tor_render:
    topology: inventories/lab/fabric.yml
    dest: intended
    options:
      md5: required
      bfd: {enabled: true}
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
written:
  description: Files written (or that would be written in check mode).
  returned: always
  type: list
  elements: str
devices:
  description: Per device its kind, platform, config path, sha256 of the config with its secrets redacted (no
    key-derived value leaves the plugin), session counts,
    the sysctls the platform needs for L4 ECMP hashing and C(md5_names), the names whose keys the config needs.
    The config file names each TCP-MD5 key by a C(password <md5:NAME>) placeholder (NAME = host or spine); the
    keys are filled in on the device (C(netscale.multinic.frr_config) option C(secrets)), so no key is written to
    the controller's disk.
  returned: always
  type: dict
  sample: {"lab-r1-tor": {"kind": "tor", "platform": "frr", "config": "intended/configs/lab-r1-tor.cfg",
           "counts": {"neighbors": 12}, "sysctls": {"net.ipv4.fib_multipath_hash_policy": 1}}}
dest:
  description: The intended/ directory used.
  returned: always
  type: str
"""

# The options of the action plugin (plugins/action/tor_render.py takes its valid arguments from here).
ARGUMENT_SPEC = dict(
    topology=dict(type="path"),
    dest=dict(type="path", default="intended"),
    devices=dict(type="list", elements="str"),
    options=dict(type="dict", default={}),
    spine_networks=dict(type="dict", default={}),
    bfd_multihop_hosts=dict(type="list", elements="str"),
    md5_keys_var=dict(type="str", default="tor_bgp_md5_keys"),
)
