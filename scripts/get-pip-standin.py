"""Stand-in for get-pip.py, used by ansible-test to put pip into its sanity venvs.

ansible-test downloads get-pip.py from a host this project's CI cannot reach, and uses a copy in
~/.ansible/test/cache/ when one exists. This script does the same job with the standard library's
ensurepip and then installs the requested pip release from PyPI. scripts/test.sh installs it there.
"""
import subprocess
import sys

# get-pip.py's own switches; everything else is passed to `pip install` as get-pip.py does.
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)
