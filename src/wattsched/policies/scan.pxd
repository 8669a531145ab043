# C types for the compiled backfill scan (Cython reads this beside scan.py; pure Python ignores it).
cimport cython
from libc.stdint cimport int64_t


@cython.final
cdef class Scanner:
    cdef readonly object arrays
    cdef const double[::1] key, var, wall
    cdef const int64_t[::1] nodes
    cdef Py_ssize_t size

    cpdef bint over(self, object key, object var, object nodes, object wall)

    @cython.locals(p=Py_ssize_t, n=int64_t, x=double, room=double, k2=double)
    cpdef Py_ssize_t next_candidate(self, Py_ssize_t lo, Py_ssize_t hi, int64_t free, double base, double k,
                                    double var0, double limit, double horizon, int64_t extra, double at_base,
                                    double at_var0, double at_limit) except -1
