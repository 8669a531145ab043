# C types for the compiled ledger (Cython reads this beside ledger.py; pure Python ignores it).
# The per-job hot path is typed: the counters, the free list and the operations a start or an end runs.
cimport cython

# node states (module constants, C integers here)
cdef int _IDLE, _BUSY, _OFF, _SW_ON, _SW_OFF, _STATES


@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cpdef Py_ssize_t _insertion_point(list free, Py_ssize_t node) except -1


@cython.final
cdef class Ledger:
    cdef dict __dict__
    cdef public double now, power_w, energy_j
    cdef public bint homogeneous
    cdef public list state, free, idle_w, busy_w, gpu_tdp_w
    # per node state (7 states): C arrays here, lists in pure Python; read from Python, they come out as lists
    cdef public double state_node_s[7], state_energy_j[7], state_power[7], state_t[7]
    cdef public Py_ssize_t state_count[7]

    cpdef advance(self, double t)

    @cython.locals(dt=cython.double)
    cpdef touch(self, int state)

    cpdef set_power(self, int state, double delta)

    cpdef move_nodes(self, int old, int new, Py_ssize_t count)

    @cython.locals(now=cython.double, dt=cython.double)
    cpdef occupy(self, Py_ssize_t count, double idle_w, double busy_w)

    cpdef take(self, Py_ssize_t node)

    cpdef give(self, Py_ssize_t node)

    @cython.locals(n=Py_ssize_t, top=Py_ssize_t, free=list)
    cpdef give_all(self, tuple nodes)
