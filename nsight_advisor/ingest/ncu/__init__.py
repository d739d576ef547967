"""Nsight Compute: read a ``.ncu-rep`` (through NVIDIA's ``ncu_report`` module) or an ``ncu --csv`` export into the
normalized ``ncu_*`` tables, with metric names and units made uniform across versions and chips."""
