# C types for the compiled event heap (Cython reads this beside events.py; pure Python ignores it).
# The keys are compared as C numbers: time as a double, kind and sequence as integers.
cimport cython

@cython.final
cdef class EventHeap:
    cdef public list items
    cdef public Py_ssize_t seq

    cpdef push(self, double t, Py_ssize_t kind, object obj=*, Py_ssize_t version=*)

    @cython.locals(items=list, last=tuple, first=tuple)
    cpdef tuple pop(self)

    @cython.locals(items=list)
    cpdef double first_time(self)


@cython.locals(ta=double, tb=double, ka=Py_ssize_t, kb=Py_ssize_t, sa=Py_ssize_t, sb=Py_ssize_t)
cdef bint _before(tuple a, tuple b) except -1


@cython.locals(new=tuple, parent=tuple, parent_pos=Py_ssize_t)
cdef object _sift_down(list items, Py_ssize_t start, Py_ssize_t pos)


@cython.locals(end=Py_ssize_t, start=Py_ssize_t, new=tuple, child=Py_ssize_t, right=Py_ssize_t)
cdef object _sift_up(list items, Py_ssize_t pos)
