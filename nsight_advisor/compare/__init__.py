"""Comparing two runs: match kernels, iterations, Nsight Compute metrics and findings between a BASE and a HEAD
side, test what changed (``stats``), explain a regression (``why``) and say it in one verdict
(``comparison``). Each side is analyzed through the workflow, as ``analyze`` would (``sides``).
"""
