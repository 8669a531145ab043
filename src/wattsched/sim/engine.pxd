# C types for the compiled engine (Cython reads this beside engine.py; pure Python ignores it).
# The per-event path is typed: the clock, counters and heap, the ledger with its run records, the intake and
# the recorder, the methods called once or twice per job. Everything else stays a Python attribute.
cimport cython

from wattsched.model.job cimport Job
from wattsched.model.ledger cimport Ledger, Run
from wattsched.model.plan cimport Plan, Start
from wattsched.model.queue_index cimport QueueIndex
from wattsched.model.snapshot cimport Snapshot
from wattsched.sim.events cimport EventHeap
from wattsched.sim.intake cimport Intake
from wattsched.sim.recorder cimport Recorder


# event kinds and node states (module constants, C integers here)
cdef int _END, _SWITCH, _STEP, _CAP, _BUDGET, _TICK, _DR
cdef int _BUSY, _SW_ON, _SW_OFF
cdef double _EPS


@cython.final
cdef class Engine:
    cdef dict __dict__
    cdef public double now, _until, _limit, _cap_now
    cdef public Py_ssize_t epoch, _events, _calls
    cdef public bint _hold_open, _stopping, _always_call, _skip_steps, _moved, _free_starts, _rejected
    cdef public Ledger ledger
    cdef public Intake intake
    cdef public Recorder recorder
    cdef public EventHeap _heap
    cdef public list state, free
    cdef public dict node_cap_w, node_freq_hz, pending, running, stats
    cdef public QueueIndex qindex
    cdef public Snapshot _snapshot
    cdef public object response, options, predictor, controls

    cpdef bint _could_start(self) except -1

    @cython.locals(heap=EventHeap, items=list, head=tuple, runs=dict, run=Run)
    cpdef double _next_time(self) except? -1

    @cython.locals(heap=EventHeap, items=list, runs=dict, run=Run, kind=int, control=bint)
    cpdef bint _events_at(self, double t) except? -1

    @cython.locals(intake=Intake, first_new=Py_ssize_t)
    cpdef _submit_at(self, double t)

    cpdef _decide(self, double t)

    cpdef _refresh(self, double t)

    cpdef _push(self, double t, int kind, object obj=*, Py_ssize_t version=*)

    @cython.locals(now=cython.double, finish=cython.double, kill=cython.double)
    cpdef _schedule_end(self, Run run)

    @cython.locals(at=cython.double, offset=cython.double)
    cpdef _schedule_step(self, Run run, double finish)

    @cython.locals(ledger=Ledger, speed=cython.double)
    cpdef _power_step(self, Run run)

    @cython.locals(run=Run, ledger=Ledger)
    cpdef _start(self, Start action)

    cpdef _reschedule(self)

    @cython.locals(ledger=Ledger)
    cpdef _end(self, Run run)

    cpdef _record(self, Job job, object state, double start, double end, double energy_j=*, double work_s=*,
                  Py_ssize_t nodes=*)
