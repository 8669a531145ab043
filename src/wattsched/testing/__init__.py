"""Test doubles for hardware this machine may lack; never imported by the daemon, the agent or the simulator.

- :mod:`wattsched.testing.fake_sysfs` builds a fake RAPL powercap and cpufreq sysfs tree with the
  layout, values and file modes of a real node (``python -m wattsched.testing.fake_sysfs ROOT``);
  the test cluster's power emulator and the agent tests run on it.
- :mod:`wattsched.testing.fake_bmc` is a BMC that speaks DCMI power management over RMCP+ on
  loopback (``python -m wattsched.testing.fake_bmc``), for the IPMI actuator's tests with the real
  ``ipmitool``.
"""
