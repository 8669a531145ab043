# C types for the compiled snapshot (Cython reads this beside snapshot.py; pure Python ignores it).
# A snapshot is a C type: the engine brings its figures to each instant, and the policies and the guard read
# its fields (the queue, the free nodes, the clock) as struct members where their locals are typed.
cimport cython


@cython.final
cdef class Snapshot:
    cdef public object now_s, platform, pending, running, free_nodes, node_state, cap, cap_lookahead_s, budgets
    cdef public object upcoming_budgets, dr_events, platform_power_w, epoch, estimator, unsettled_nodes
    cdef public object node_cap_w, node_freq_hz, desired_node_cap_w, desired_node_freq_hz, queue_index
    cdef public object estimates, running_estimate, jobs_power_w, end_table, ends, forecast, can_reshape
    cdef public object reshape_shrink_only, node_free
