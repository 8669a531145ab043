"""wattsched: a power-aware job dispatcher for HPC clusters that run Slurm.

The same policy code runs live (the daemon, against Slurm) and offline (the
trace-replay simulator). See ``docs/`` for the user documentation.
"""

__version__ = "0.1.0"

from wattsched import _native

_native.install_guard()  # compiled simulation core: used only while it matches its source
