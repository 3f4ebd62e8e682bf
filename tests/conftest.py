"""Make the checkout importable as ansible_collections.netscale.multinic (scripts/setup.sh links it)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, ".build")
link = os.path.join(BUILD, "ansible_collections", "netscale", "multinic")
if not os.path.exists(link):
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(ROOT, link)
if BUILD not in sys.path:
    sys.path.insert(0, BUILD)
