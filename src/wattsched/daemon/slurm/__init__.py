"""Slurm backends: the one place that talks to Slurm (CLI JSON, plain text, pyslurm)."""
