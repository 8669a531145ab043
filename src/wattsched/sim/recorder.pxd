# C types for the compiled recorder (Cython reads this beside recorder.py; pure Python ignores it).
# A job's row and an event's row are typed: they are written once per job and once per event.
cimport cython

from wattsched.model.job cimport Job
from wattsched.model.ledger cimport JobAccount, Ledger
from wattsched.sim.rows cimport Rows

# node states (module constants, C integers here)
cdef int _BUSY, _OFF


@cython.final
cdef class Recorder:
    cdef dict __dict__
    cdef public Ledger ledger
    cdef public list job_ids, job_users, job_states, rejections, control_log, sizes
    cdef public Rows job_rows, timeline

    @cython.locals(acc=JobAccount)
    cpdef job(self, Job job, object state, double start, double end, double energy_j, double work_s, Py_ssize_t nodes=*)

    @cython.locals(ledger=Ledger)
    cpdef row(self, double t, double cap_w)
