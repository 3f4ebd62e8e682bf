# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health gates (Argo-Rollouts-style analysis): engine, condition expressions, built-in gates and
measurement adapters. Pure Python, no Ansible imports."""
