"""Helpers every layer may use, and that use no layer: errors, text and JSON formatting, SQL parameters, progress
lines, the run folder for temporary files, where the shipped data folders are, the version numbers.

Nothing here imports another part of the package (tests/test_house.py and the import-linter contracts in
pyproject.toml keep it so).
"""
