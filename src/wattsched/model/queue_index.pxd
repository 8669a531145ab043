# C types for the compiled queue index (Cython reads this beside queue_index.py; pure Python ignores it).
# A job is appended when submitted and removed when it starts: those stores go through typed views of the
# arrays. The arrays themselves stay Python attributes (numpy's, for the searches).
cimport cython
from libc.stdint cimport int64_t

from wattsched.model.job cimport Job

cdef double _INF


@cython.final
cdef class QueueIndex:
    cdef dict __dict__
    cdef public object idle_w, ids, nodes, wall, alive, est_mean, est_max, est_std, inc_mean, inc_max, inc_var
    cdef public dict pos
    cdef public Py_ssize_t size, dead
    cdef dict _sizes
    cdef int64_t _smallest
    cdef int64_t[::1] _ids, _nodes
    cdef unsigned char[::1] _alive
    cdef double[::1] _wall, _est_mean, _est_max, _est_std, _inc_mean, _inc_max, _inc_var

    @cython.locals(i=Py_ssize_t)
    cpdef append(self, Job job)

    @cython.locals(i=Py_ssize_t)
    cpdef set_estimate(self, object job_id, object mean_w, object max_w, object std_w=*)

    @cython.locals(i=Py_ssize_t, k=int64_t, left=Py_ssize_t)
    cpdef remove(self, object job_id)

    cpdef int64_t smallest(self) except -1

    cpdef _count(self, int64_t nodes)
