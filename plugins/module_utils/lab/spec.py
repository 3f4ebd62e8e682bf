# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a lab builds, derived from the topology and its plan (no addresses hard-coded)."""

from __future__ import annotations

import hashlib
import json
import os

from ansible_collections.netscale.multinic.plugins.module_utils.lab import frr as frrmod
from ansible_collections.netscale.multinic.plugins.module_utils.lab import image as imagemod
from ansible_collections.netscale.multinic.plugins.module_utils.lab import nodes
from ansible_collections.netscale.multinic.plugins.module_utils.lab.section import lab_section
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError
from ansible_collections.netscale.multinic.plugins.module_utils.writing import redact


class LabSpec(object):
    """Nodes, links and FRR configs of one lab. ``tor_config_dir``: rendered ToR configs
    (``<tor>.cfg``) to start with instead of the uplink-only policy."""

    def __init__(self, topo, plan, topology_file=None, tor_config_dir=None, md5_keys=None):
        self.topo = topo
        # {spine: key}: TCP-MD5 of the ToR<->spine sessions (the lab inventory's tor_bgp_md5_keys)
        self.md5_keys = dict(md5_keys or {})
        self.plan = plan
        self.fabric = topo.name
        self.topology_file = topology_file
        section = lab_section(topo)
        if not section.get("storage"):
            raise LabError("topology %s: section 'lab.storage' is missing (value: %r); add "
                           "lab: {storage: {name: lab-storage, ipv6: fd00:5::/64, ipv4: 198.19.5.0/24}}"
                           % (topology_file or topo.name, section.get("storage")))
        self.storage = dict(section["storage"])
        self.storage_name = self.storage.get("name", "lab-storage")
        self.storage_addr = frrmod.storage_addresses(self.storage)
        self.racks = [plan.rack_data(r) for r in topo.racks]
        self.spines = [plan.spine_data(s) for s in topo.spines]
        if not self.spines:
            raise LabError("topology %s: no spine; the lab needs at least one spine" % self.fabric)
        self.hosts = [h for r in self.racks for h in r["hosts"]]
        self.tor_config_dir = tor_config_dir

    def tor_config(self, rack, keyed=True):
        if self.tor_config_dir:
            path = os.path.join(self.tor_config_dir, "%s.cfg" % rack["tor"]["name"])
            if os.path.exists(path):
                with open(path) as handle:
                    return handle.read()
        return frrmod.tor_build_config(rack, self.md5_keys if keyed else None)

    def spine_config(self, index, spine, keyed=True):
        # The storage node is wired to the first spine only.
        return frrmod.spine_build_config(spine, self.storage if index == 0 else None,
                                         self.md5_keys if keyed else None)

    def frr_configs(self):
        """[(node, FRR config)] of every spine and ToR."""
        out = [(s["name"], self.spine_config(i, s)) for i, s in enumerate(self.spines)]
        out += [(r["tor"]["name"], self.tor_config(r)) for r in self.racks]
        return out

    def node_list(self):
        out = [(s["name"], "spine") for s in self.spines]
        out += [(r["tor"]["name"], "tor") for r in self.racks]
        out.append((self.storage_name, "storage"))
        out += [(h["name"], "gpu_host") for h in self.hosts]
        return out

    def node_hashes(self):
        """{node: hash of what that node is built from}: a GPU host's own data (rack, ToR, NICs) and
        the image; a box's FRR config and its links' data. The lab compares them with the running
        lab's to build or tear down only the GPU hosts that changed (engine.Lab.build)."""
        def digest(obj):
            return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()
        out = {}
        for h in self.hosts:
            out[h["name"]] = digest({"host": h, "image": imagemod.image_key(), "script": nodes.HOST_SCRIPT})
        for r in self.racks:
            rack = dict((k, v) for k, v in r.items() if k != "hosts")
            config = redact(self.tor_config(r, keyed=False))
            out[r["tor"]["name"]] = digest({"rack": rack, "config": config, "box": nodes.BOX_SCRIPT})
        for i, sp in enumerate(self.spines):
            out[sp["name"]] = digest({"spine": sp, "config": self.spine_config(i, sp, keyed=False),
                                      "box": nodes.BOX_SCRIPT, "storage": self.storage if i == 0 else None})
        out[self.storage_name] = digest({"storage": self.storage, "addr": self.storage_addr, "box": nodes.BOX_SCRIPT})
        return out

    def plan_hash(self):
        """Changes whenever what the lab would build changes (a running lab is then rebuilt)."""
        blob = json.dumps({
            "racks": self.racks, "spines": self.spines, "storage": self.storage, "storage_addr": self.storage_addr,
            # without the TCP-MD5 keys: no key-derived value in the state file, and the same hash for
            # the lab_* modules, which open the lab without the inventory's keys (redact: a given config dir)
            "tors": [redact(self.tor_config(r, keyed=False)) for r in self.racks],
            "spine_cfg": [self.spine_config(i, s, keyed=False) for i, s in enumerate(self.spines)],
            "image": imagemod.image_key(), "box": nodes.BOX_SCRIPT, "host": nodes.HOST_SCRIPT,
        }, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()
