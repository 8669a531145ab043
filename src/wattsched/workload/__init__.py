"""Workload I/O: trace records, SWF and job-table readers and writers, power augmentation, synthetic workloads.

Shared by the simulator, the daemon's demo cluster, predictor evaluation and the
command line. The records (:class:`TraceJob`, :class:`Workload`) carry the
ground truth a policy never sees; the engine turns them into
:class:`~wattsched.model.job.Job` values at submission.
"""

from wattsched.workload.records import CleaningReport, TraceJob, Workload, true_power

__all__ = ["CleaningReport", "TraceJob", "Workload", "true_power"]
