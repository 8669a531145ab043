# C types for the compiled ledger (Cython reads this beside ledger.py; pure Python ignores it).
# The per-job hot path is typed: the run records, the counters, the free list and the operations a
# submission, a start or an end runs. Everything else stays a Python attribute (Ledger.__dict__).
cimport cython

from wattsched.model.job cimport Job, RunningJob

# node states (module constants, C integers here)
cdef int _IDLE, _BUSY, _OFF, _SW_ON, _SW_OFF, _STATES


@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cpdef Py_ssize_t _insertion_point(list free, Py_ssize_t node) except -1


@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t, e=tuple, t=double, n=Py_ssize_t, j=Py_ssize_t,
               before=bint)
cpdef Py_ssize_t _end_position(list ends, double end_s, Py_ssize_t k, Py_ssize_t job_id, bint right) except -1


@cython.final
cdef class Run:
    cdef public Job job
    cdef public RunningJob view
    cdef public object truth, response, estimate, nodes, job_cap_w, job_freq_hz, unit_dyn_w, pass_model
    cdef public bint dynamic, job_settings
    cdef public double idle_share_w, floor_w, energy_j, last_s, node_power_w, power_w, speed, start_s, work_done_s, work_left_s
    cdef public double est_mean_w, est_max_w, est_std_w, pass_ref_s, limit_work_s
    cdef public Py_ssize_t version, step_index


@cython.final
cdef class JobAccount:
    cdef public Py_ssize_t evictions
    cdef public double energy_j, wasted_j, wasted_node_s


@cython.final
cdef class Ledger:
    cdef dict __dict__
    cdef public double now, power_w, energy_j
    cdef public bint homogeneous
    cdef public list state, free, idle_w, busy_w, gpu_tdp_w, ends, running_est, rerated
    # per node state (7 states): C arrays here, lists in pure Python; read from Python, they come out as lists
    cdef public double state_node_s[7], state_energy_j[7], state_power[7], state_t[7]
    cdef public Py_ssize_t state_count[7]
    cdef public dict node_cap_w, node_freq_hz, node_cap_set, node_freq_set, node_free, node_runs
    cdef public dict pending, estimates, default_estimates, running, runs, accounts
    cdef public object platform, qindex, end_table, responses, scenario, estimate
    cdef public dict pass_models
    cdef public double pass_node_w, pass_top_w

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

    cpdef submit(self, Job job)

    cpdef set_estimate(self, object job_id, object est)

    cpdef Run start(self, object job_id, object nodes, object cap_w, object freq_hz, object truth)

    @cython.locals(run=Run, k=Py_ssize_t, idle=cython.double, state=list, free=list)
    cpdef Run begin(self, Job job, object nodes, object cap_w, object freq_hz, object truth, double start_s)

    @cython.locals(job=Job, k=Py_ssize_t, re=list, mean_w=cython.double, max_w=cython.double, std_w=cython.double)
    cpdef _account_start(self, Run run, Py_ssize_t k)

    cpdef end(self, Run run)

    @cython.locals(idle=cython.double, k=Py_ssize_t, re=list, i=Py_ssize_t)
    cpdef _release(self, Run run)

    @cython.locals(dt=cython.double, done=cython.double)
    cpdef settle(self, Run run)

    @cython.locals(total=cython.double, mult=cython.double)
    cpdef rate(self, Run run)

    @cython.locals(old=cython.double)
    cpdef power_step(self, Run run)

    @cython.locals(total=cython.double, lowest=cython.double, p=cython.double, base=cython.double)
    cpdef _rate_pass(self, Run run)
