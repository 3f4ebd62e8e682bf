# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Headline benchmark of netscale.multinic (issue 8): checkpoint save/load and job reads under a
surge, before (single NIC) and after the rollout, on the fabric lab. Entry point: ``python bench/headline``
(this package's ``__main__``)."""
