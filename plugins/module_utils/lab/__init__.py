# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric lab engine: builds and tears down the embedded lab from the planner's output.

Pure Python (no Ansible imports). Needs root and the Linux tools listed in scripts/setup.sh.
"""
