# C types for the compiled backfill scan (Cython reads this beside scan.py; pure Python ignores it).
cimport cython
from libc.stdint cimport int64_t


cdef extern from "math.h":
    double _c_sqrt "sqrt" (double x) nogil


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

    @cython.locals(p=Py_ssize_t, n=int64_t)
    cpdef Py_ssize_t next_fit(self, Py_ssize_t lo, Py_ssize_t hi, int64_t free, double horizon, int64_t extra) except -1


@cython.locals(m=Py_ssize_t, e=Py_ssize_t, i=Py_ssize_t, j=Py_ssize_t, cn=double, cm=double, cx=double, cv=double,
               t=double, end=double, t_next=double, avail=double, base=double, mean=double, mx=double, var=double)
cpdef object walk_ends(const double[:, ::1] rows, const double[:, ::1] extra, double now, int64_t free, int64_t need,
                       int method, double k, double base_w, double idle_w, double mean_w, double max_w, double var_w2,
                       double dm, double dx, double dv, double limit, bint capped)


@cython.locals(s=double)
cdef double _power(int method, double k, double base, double mean, double mx, double var, double dm, double dx,
                   double dv) noexcept
