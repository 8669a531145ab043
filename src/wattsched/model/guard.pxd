# C types for the compiled guard (Cython reads this beside guard.py; pure Python ignores it).
# The fast path that most plans take is typed: node indices and states are compared as C integers.
cimport cython

from wattsched.model.job cimport Job
from wattsched.model.plan cimport Plan
from wattsched.model.snapshot cimport Snapshot

cdef Py_ssize_t IDLE


@cython.locals(job=Job, n=Py_ssize_t, s=Py_ssize_t, total=Py_ssize_t, k=Py_ssize_t)
cpdef bint _plain_starts_ok(Snapshot snapshot, Plan plan) except -1
