"""The normalized DuckDB store and how a run gets one: build or reuse a cached store for a set of captures
(``opening``), under a lock (``cache``), ingesting many captures at once on local workers or Ray
(``parallel_ingest``, ``ray_ingest``, ``executors``), and the kept results of earlier analyses
(``result_cache``).

Sits above ``ingest`` (it runs the readers) and below ``analysis`` (which reads what it opens).
"""
