# C types for the compiled EASY policy (Cython reads this beside easy.py; pure Python ignores it).
cimport cython

from wattsched.model.job cimport Job
from wattsched.model.plan cimport Plan, Start, start_nodes
from wattsched.model.snapshot cimport Snapshot

cdef long _backfill_extra(double now, double walltime_s, double shadow, long k, long extra) noexcept


@cython.locals(now=double, avail=Py_ssize_t, i=Py_ssize_t, m=Py_ssize_t, e=double, n=Py_ssize_t, se=double,
               sn=Py_ssize_t, item=tuple, end=double)
cpdef tuple shadow_time(object snapshot, Py_ssize_t head_nodes, Py_ssize_t free, list started)
