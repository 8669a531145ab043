# C types for the compiled intake (Cython reads this beside intake.py; pure Python ignores it).
# The per-job path is typed: the submission loop, the ground truth, the ledger it submits to.
cimport cython

from wattsched.model.job cimport Job
from wattsched.model.ledger cimport Ledger, Run
from wattsched.workload.records cimport TraceJob


cpdef Job make_job(TraceJob tj)


@cython.final
cdef class Intake:
    cdef dict __dict__
    cdef public object next_job, predictor, _jobs, _bar, _snapshot
    cdef public dict truth
    cdef public Py_ssize_t submitted
    cdef public bint pack, _maps_units, _index_estimates
    cdef public Ledger ledger

    @cython.locals(job=Job, nxt=TraceJob, truth=dict, ledger=Ledger, submitted=Py_ssize_t, first_new=Py_ssize_t, hot=list)
    cpdef list submit_until(self, double t)

    @cython.locals(ledger=Ledger)
    cpdef _estimate(self, Py_ssize_t count)

    cpdef learn(self, Run run, double end_s)
