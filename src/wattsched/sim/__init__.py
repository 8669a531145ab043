"""The trace-replay simulator: workloads, platforms, the event engine, metrics and reports."""
