"""Plain reference algorithms of the policies whose code keeps only a fast path (STYLE.md §3).

Used by tests only: ``tests/unit/test_fast_paths.py`` holds each policy's
decisions equal to its reference's on random snapshots.
"""
