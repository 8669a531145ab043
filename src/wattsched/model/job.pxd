# C types for the compiled job model (Cython reads this beside job.py; pure Python ignores it).
# A job as submitted and a running job's view are extension types: the compiled core reads their
# fields as C struct members where its locals are typed, instead of through Python attribute lookup.
cimport cython


@cython.final
cdef class Job:
    cdef readonly object id, submit_s, walltime_s, nodes, user, group, account, partition, qos, procs
    cdef readonly object cores_per_node, gpus_per_node, mem_per_node_mb, min_nodes, max_nodes, malleable
    cdef readonly object exclusive, priority, app_class, features, units, distinct_nodes, app


@cython.final
cdef class RunningJob:
    cdef readonly object job, start_s, nodes, expected_end_s, power_w, speed, freq_hz, cap_w, work_done_s
    cdef readonly object settled_s


@cython.locals(obj=Job)
cpdef Job job_from_fields(id, submit_s, walltime_s, nodes, user, group, account, partition, qos, procs,
                          cores_per_node, gpus_per_node, mem_per_node_mb, min_nodes, max_nodes, malleable,
                          exclusive, priority, app_class, features, units, distinct_nodes, app)

@cython.locals(obj=RunningJob)
cpdef RunningJob running_job_from_fields(job, start_s, nodes, expected_end_s, power_w, speed, freq_hz, cap_w,
                                         work_done_s, settled_s)
