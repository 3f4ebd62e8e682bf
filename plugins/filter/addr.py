# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Address filters for templates; documentation in the same-named .yml files."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.netscale.multinic.plugins.module_utils import addr


def _wrap(name, func):
    def filt(value):
        try:
            return func(value)
        except ValueError as exc:
            raise AnsibleFilterError("netscale.multinic.%s: %r is not an IP address or prefix (%s)" % (name, value, exc))
    return filt


class FilterModule(object):
    def filters(self):
        return {name: _wrap(name, getattr(addr, name)) for name in ("ip_address", "prefix_length", "ip_version", "host_prefix")}
