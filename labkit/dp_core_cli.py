# -*- coding: utf-8 -*-
"""Test-only entry point: run the datapath core in the current (host) network namespace.

usage: nsenter --net=/run/netns/<host> python labkit/dp_core_cli.py REQUEST.json
REQUEST: {"host": host_data, "netns_names": {slot: name}, "ebpf": bool, "mptcp": bool, "numa": {...}|null, "options": {...},
          "mptcp_families": [...]|null (optional),
          "action": "apply"|"check"|"remove"|"remove-check"}
Prints {"changes": [...], "log": [...]} or {"error": "..."} (exit 2).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".build"))

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import core, spec as datapath_spec  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError  # noqa: E402


def main():
    with open(sys.argv[1]) as f:
        req = json.load(f)
    try:
        names = dict((int(k), v) for k, v in (req.get("netns_names") or {}).items())
        sp = datapath_spec.build_spec(req["host"], netns_names=names, ebpf=req.get("ebpf", True),
                                      mptcp=req.get("mptcp", False), numa=req.get("numa"),
                                      mptcp_families=req.get("mptcp_families"))
        dp = core.Datapath(sp, core.Options(**req.get("options", {})))
        act = req.get("action", "apply")
        if act in ("apply", "check"):
            changes = dp.apply(check_mode=(act == "check"))
        else:
            changes = dp.remove(check_mode=(act == "remove-check"))
        print(json.dumps({"changes": changes, "log": dp.runner.log}))
    except MultinicError as e:
        print(json.dumps({"error": str(e)}))
        sys.exit(2)


if __name__ == "__main__":
    main()
