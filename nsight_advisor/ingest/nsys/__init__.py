"""Nsight Systems: read an ``nsys export`` SQLite file (every schema from 2020 on) or a raw ``.nsys-rep``/``.qdrep``
(exported first with ``nsys`` when it is installed) into the normalized tables."""
