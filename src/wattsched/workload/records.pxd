# C types for the compiled workload records (Cython reads this beside records.py; pure Python ignores it).
# A trace record is a C type: the reader fills one per job, the intake and the engine read its fields as
# struct members where their locals are typed.
cimport cython


@cython.final
cdef class TraceJob:
    cdef public object id, submit_s, runtime_s, walltime_s, procs, nodes, user, group, partition, status
    cdef public object mean_w, max_w, std_w, app_class, power_series, gpus_per_node, min_nodes, max_nodes
    cdef public object malleable, extra, units
