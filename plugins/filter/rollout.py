# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rollout filters (waves, ToRs to restore); documentation in the same-named .yml files."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.netscale.multinic.plugins.module_utils.rollout import waves


def rollout_wave_plan(hosts, canary=None, waves_spec=None, start_wave=None, end_wave=None):
    try:
        return waves.plan_waves(list(hosts or []), canary or None, list(waves_spec or ["5%", "25%", "100%"]),
                                start_wave or None, end_wave or None)
    except waves.WaveError as exc:
        raise AnsibleFilterError("netscale.multinic.rollout_wave_plan: %s" % exc)


def rollout_restore_racks(all_waves, failed_wave, passed_waves=None):
    all_waves = list(all_waves or [])
    if passed_waves is None:
        # every wave before the failed one passed (or was skipped on resume: it passed in an earlier run)
        names = [w["name"] for w in all_waves]
        if failed_wave not in names:
            raise AnsibleFilterError("netscale.multinic.rollout_restore_racks: wave %r not in %s" % (failed_wave, names))
        passed_waves = names[:names.index(failed_wave)]
    return waves.racks_to_restore(all_waves, failed_wave, list(passed_waves))


class FilterModule(object):
    def filters(self):
        return {"rollout_wave_plan": rollout_wave_plan, "rollout_restore_racks": rollout_restore_racks}
