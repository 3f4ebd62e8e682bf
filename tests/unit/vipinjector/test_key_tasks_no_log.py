"""Every task that hands a TCP-MD5 key to a module runs with ``no_log: true`` (docs/security.md, leaked
log). Exceptions, each by construction: ``include_role``/``include_tasks`` (their ``vars`` are not
logged), ``tor_render``'s ``md5_keys_var`` (the variable's *name*, the plugin reads it), ``frr_config``'s
``secrets`` and ``content`` (no_log in its argument spec), and ``assert``
tasks whose message names no key variable (an assert reports its expression, not the values)."""
import glob
import os
import re

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
KEY_VARS = re.compile(r"md5_password|md5_keys\b|tor_bgp_md5_keys|lab_vault_md5_secret|\bvault_\w+")
NOT_LOGGED = {"ansible.builtin.include_role", "ansible.builtin.import_role", "ansible.builtin.include_tasks",
              "ansible.builtin.import_tasks", "ansible.builtin.import_playbook"}
KEYWORDS = {"name", "vars", "when", "loop", "loop_control", "register", "no_log", "tags", "delegate_to",
            "run_once", "check_mode", "changed_when", "failed_when", "until", "retries", "delay", "become",
            "environment", "notify", "listen", "ignore_errors", "any_errors_fatal", "args"}


def _tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        if any(k in node for k in ("block", "rescue", "always")):
            for k in ("block", "rescue", "always"):
                yield from _tasks(node.get(k) or [])
        elif "hosts" in node or "tasks" in node:
            for k in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from _tasks(node.get(k) or [])
        else:
            yield node


def _files():
    pats = ["roles/*/tasks/*.yml", "roles/*/handlers/*.yml", "playbooks/*.yml", "playbooks/tasks/*.yml",
            "molecule/*/*.yml"]
    return sorted(f for p in pats for f in glob.glob(os.path.join(REPO, p)))


def test_tasks_carrying_a_key_are_no_log():
    offenders, checked = [], 0
    for path in _files():
        with open(path) as handle:
            data = yaml.safe_load(handle)
        for task in _tasks(data or []):
            modules = [k for k in task if k not in KEYWORDS]
            if not modules or modules[0] in NOT_LOGGED:
                continue
            module, args = modules[0], task[modules[0]]
            if module.endswith("tor_render") and isinstance(args, dict):
                args = dict((k, v) for k, v in args.items() if k != "md5_keys_var")
            if module.endswith("frr_config") and isinstance(args, dict):
                # frr_config declares secrets (and content) no_log in its argument spec: Ansible masks the values
                args = dict((k, v) for k, v in args.items() if k not in ("secrets", "content"))
            if module == "ansible.builtin.assert" and isinstance(args, dict):
                # only what the message templates can show (a variable named in prose shows nothing)
                args = re.findall(r"\{\{.*?\}\}", "%s %s" % (args.get("fail_msg", ""), args.get("msg", "")), re.S)
            if not KEY_VARS.search(repr(args)):
                continue
            checked += 1
            if task.get("no_log") is not True:
                offenders.append("%s: %s" % (os.path.relpath(path, REPO), task.get("name")))
    assert checked >= 1, "no key-carrying task found: the pattern no longer matches the roles"
    assert not offenders, "tasks hand a key to a module without no_log: true: %s" % offenders
