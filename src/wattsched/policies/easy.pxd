# C types for the compiled EASY policy (Cython reads this beside easy.py; pure Python ignores it).

cdef long _backfill_extra(double now, double walltime_s, double shadow, long k, long extra) noexcept
