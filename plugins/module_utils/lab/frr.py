# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""FRR on the lab's spine and ToRs: their configs (rendered by the product's ToR policy,
``tor_policy``; the lab has no renderer of its own) and the daemons' files and command lines.

At build time a ToR runs the uplink part of its policy only (rack aggregate to the spines, no host
sessions): the rollout deploys the full policy with the tor_bgp role, as on a real fabric. The
first spine also originates the storage prefixes (the storage node hangs off it).
"""

from __future__ import annotations

import ipaddress
import os

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy
from ansible_collections.netscale.multinic.plugins.module_utils.lab.section import storage_spine_networks

DAEMONS = ("zebra", "staticd", "bgpd", "bfdd")

# The lab's addresses are set by the lab itself (ip address add); FRR configures routing only.
BUILD_OPTIONS = {"render_interfaces": False}


def tor_build_config(rack, md5_keys=None):
    """FRR config a lab ToR starts with: its policy's uplink part (see the module doc).
    ``md5_keys``: {spine: key} of the ToR<->spine sessions (TCP-MD5), as the ToR policy renders them."""
    return tor_policy.render(tor_policy.tor_uplinks_config(rack, BUILD_OPTIONS, md5_keys=md5_keys))


def spine_build_config(spine, storage=None, md5_keys=None):
    """FRR config of a lab spine; ``storage`` (the topology's lab.storage) when the storage node is
    attached to this spine; ``md5_keys[<spine>]`` the TCP-MD5 key of its sessions to the ToRs."""
    options = dict(BUILD_OPTIONS)
    if storage:
        options["spine_networks"] = storage_spine_networks(storage)
    return tor_policy.render(tor_policy.spine_structured_config(spine, options, md5_keys=md5_keys))


DAEMONS_FILE = """\
# Written by the netscale.multinic lab: the daemons of this lab node (started directly, no init).
zebra=yes
bgpd=yes
ospfd=no
ospf6d=no
ripd=no
ripngd=no
isisd=no
pimd=no
ldpd=no
nhrpd=no
eigrpd=no
babeld=no
sharpd=no
pbrd=no
bfdd=yes
fabricd=no
vrrpd=no
pathd=no
staticd=yes
vtysh_enable=yes
zebra_options="  -A 127.0.0.1 -s 90000000"
bgpd_options="   -A 127.0.0.1"
staticd_options="-A 127.0.0.1"
bfdd_options="   -A 127.0.0.1"
"""

VTYSH_CONF = "service integrated-vtysh-config\n"

DAEMON_ARGS = {
    "zebra": ["-s", "90000000"],
}


def daemon_argv(daemon):
    """Command line of one FRR daemon with Debian's default paths (/etc/frr, /var/run/frr)."""
    return ["/usr/lib/frr/%s" % daemon, "-d", "-F", "traditional", "-A", "127.0.0.1"] + DAEMON_ARGS.get(daemon, [])


def bare_daemon_argv(daemon, run_dir, conf="/dev/null", extra=()):
    """Command line of one FRR daemon outside a lab box (a harness's ToR or BFD responder in a bare
    namespace): its own run dir holds the pid file, the vty socket and zebra's zserv.api."""
    return (["/usr/lib/frr/%s" % daemon, "-d", "-f", conf, "-i", os.path.join(run_dir, "%s.pid" % daemon),
             "--vty_socket", run_dir, "-z", os.path.join(run_dir, "zserv.api")] + list(extra))


def storage_addresses(lab_storage):
    """Spine side ::1 / .1 and storage ::10 / .10 of the lab storage prefixes."""
    out = {}
    for fam in ("ipv6", "ipv4"):
        if fam not in lab_storage:
            continue
        net = ipaddress.ip_network(lab_storage[fam], strict=True)
        out[fam] = {
            "prefix": str(net),
            "length": net.prefixlen,
            "spine": str(net.network_address + 1),
            # ::10 for IPv6, .10 for IPv4 (hex and decimal "10", as people write them)
            "storage": str(net.network_address + (0x10 if fam == "ipv6" else 10)),
        }
    return out
