# -*- coding: utf-8 -*-
"""Made-up interface facts for a spec (what datapath.live reads on a host), for the map builders' tests."""


def fake_links(sp, first_veth_ifindex=10):
    """(host links, namespace links): NIC k has ifindex 2 + k; veths are numbered from ``first_veth_ifindex``."""
    host = dict((n["name"], {"ifindex": 2 + n["index"], "address": "02:00:00:00:00:%02x" % n["index"]})
                for n in sp["nics"])
    ns, i = {}, first_veth_ifindex
    for s in sp["slots"]:
        ns[s["netns"]] = {}
        for v in s["nics"]:
            host[v["veth"]] = {"ifindex": i, "address": "02:00:00:00:01:%02x" % i}
            ns[s["netns"]][v["ifname"]] = {"ifindex": 2, "address": "02:00:00:00:02:%02x" % i}
            i += 1
    return host, ns
