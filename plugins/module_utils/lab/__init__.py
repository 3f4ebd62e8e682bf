# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# Apache License 2.0 (see LICENSE)
"""Fabric lab engine: builds and tears down the embedded lab from the planner's output.

Pure Python (no Ansible imports). Needs root and the Linux tools listed in scripts/setup.sh.
"""
