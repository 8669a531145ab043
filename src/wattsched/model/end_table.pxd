# C types for the end table's row moves (Cython reads this beside end_table.py; pure Python ignores it).
cimport cython


@cython.locals(q=Py_ssize_t)
cpdef _move(double[::1] flat, Py_ssize_t dst, Py_ssize_t src, Py_ssize_t count)


@cython.locals(end=double, k=double, mean=double, mx=double, var=double)
cpdef _put(double[::1] flat, Py_ssize_t at, tuple row)
