# C types for the compiled engine (Cython reads this beside engine.py; pure Python ignores it).
# Only the per-job hot path is typed: the run records, the engine's counters and lists, and the
# methods called once or twice per job. Everything else stays a Python attribute (Engine.__dict__).
cimport cython

from wattsched.model.ledger cimport Ledger
from wattsched.sim.rows cimport Rows


# event kinds and node states (module constants, C integers here)
cdef int _END, _SWITCH, _STEP, _CAP, _BUDGET, _TICK, _DR
cdef int _IDLE, _BUSY, _OFF, _SW_ON, _SW_OFF
cdef double _EPS


@cython.final
cdef class _Run:
    cdef public object job, truth, response, estimate, view, nodes, job_cap_w, job_freq_hz, unit_dyn_w
    cdef public bint dynamic, job_settings
    cdef public double idle_share_w, floor_w, energy_j, last_s, node_power_w, power_w, speed, start_s, work_done_s, work_left_s
    cdef public double est_mean_w, est_max_w, est_std_w
    cdef public Py_ssize_t version, step_index


@cython.final
cdef class _JobAccount:
    cdef public Py_ssize_t evictions
    cdef public double energy_j, wasted_j, wasted_node_s


@cython.final
cdef class Engine:
    cdef dict __dict__
    cdef public double now
    cdef public Ledger ledger
    cdef public Py_ssize_t _seq, epoch
    cdef public bint _homogeneous, _maps_units, _pack
    cdef public list _heap, state, free, _idle_w, _busy_w, _gpu_tdp_w, _ends, _running_est
    cdef public list _job_ids, _job_users, _job_states
    cdef public Rows _job_rows, _timeline
    cdef public dict node_cap_w, node_freq_hz, _node_cap_set, _node_freq_set, pending, running, _runs, _truth
    cdef public dict _accounts, _estimates, _default_estimates, stats
    cdef public object _responses, response, options, qindex, _end_table, _snapshot, predictor

    cpdef _push(self, double t, int kind, object obj=*, Py_ssize_t version=*)

    @cython.locals(total=cython.double, mult=cython.double)
    cpdef _rate(self, _Run run)

    @cython.locals(dt=cython.double, done=cython.double)
    cpdef _settle(self, _Run run)

    @cython.locals(now=cython.double, finish=cython.double, kill=cython.double)
    cpdef _schedule_end(self, _Run run)

    @cython.locals(run=_Run, k=Py_ssize_t, idle=cython.double)
    cpdef _start(self, object action)

    @cython.locals(k=Py_ssize_t, re=list)
    cpdef _account_start(self, _Run run, Py_ssize_t k)

    @cython.locals(idle=cython.double, k=Py_ssize_t, re=list, i=Py_ssize_t)
    cpdef _release(self, _Run run)

    cpdef _end(self, _Run run)

    cpdef _record(self, object job, object state, double start, double end, double energy_j=*, double work_s=*)
