# C types for the compiled plans (Cython reads this beside plan.py; pure Python ignores it).
# A Start and a Plan are C types: a policy makes one Plan per call and a Start per job, the guard and the
# engine read their fields as struct members where their locals are typed.
cimport cython


@cython.final
cdef class Start:
    cdef readonly object job_id, nodes, freq_hz, cap_w


@cython.final
cdef class Plan:
    cdef public object actions, reasons, default_reason, power_estimate_w


@cython.locals(obj=Start)
cpdef Start start_nodes(object job_id, object nodes)
