"""Side-by-side benchmark of replica and budget control policies on traces, in the twin.

`make bench-control` (python -m bench.control_loop) writes bench/results/control_loop.*;
docs/benchmarks.md explains the method.
"""
