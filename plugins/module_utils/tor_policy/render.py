# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Structured config -> device text, with the platform's template set."""

from __future__ import annotations

import ipaddress
import os
import re

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "templates", "tor")


def _jinja_env(template_dir=None):
    import jinja2  # Jinja2 is an Ansible (controller) dependency; imported lazily

    class _DictFirstEnvironment(jinja2.Environment):
        """``x.key`` on a dict looks up the key first (Jinja tries the Python attribute first and
        pays for an AttributeError on every lookup): about half the render time of a rack with
        per-slot peer-groups. Templates here never call dict methods."""

        def getattr(self, obj, attribute):
            if type(obj) is dict:  # pylint: disable=unidiomatic-typecheck
                try:
                    return obj[attribute]
                except KeyError:
                    pass
            return jinja2.Environment.getattr(self, obj, attribute)

    env = _DictFirstEnvironment(
        loader=jinja2.FileSystemLoader(template_dir or TEMPLATE_DIR),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["ipnet"] = lambda p: str(ipaddress.ip_network(p, strict=False))
    return env


_ENV_CACHE = {}


def render(structured, template_dir=None):
    """Device text for a structured ToR or spine config, with its platform's template set."""
    key = template_dir or TEMPLATE_DIR
    env = _ENV_CACHE.get(key)
    if env is None:
        env = _ENV_CACHE[key] = _jinja_env(template_dir)
    tset = structured["capabilities"]["templates"]
    template = env.get_template("%s/%s.j2" % (tset, structured["kind"]))
    text = template.render(c=structured)
    # Collapse accidental blank-line runs so the golden files stay stable and readable.
    return re.sub(r"\n{3,}", "\n\n", text)
