"""The trace-replay simulator: platforms, the event engine, runs, metrics and reports.

Workloads (SWF, job tables, augmentation, synthetic) are in :mod:`wattsched.workload`.
"""
