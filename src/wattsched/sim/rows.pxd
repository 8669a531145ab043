# C types for the recorded rows (Cython reads this beside rows.py; pure Python ignores it).
cimport cython


@cython.final
cdef class Rows:
    cdef readonly Py_ssize_t width, n
    cdef list _rows
    cdef double[::1] _flat

    @cython.locals(at=Py_ssize_t, k=Py_ssize_t)
    cpdef add(self, tuple row)
