"""The live daemon: observes Slurm and telemetry, runs a policy, applies its plan."""
