# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# Apache License 2.0 (see LICENSE)
"""Host datapath core of netscale.multinic (pure Python, no Ansible imports)."""
