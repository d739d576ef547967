"""Facts for the report header and charts, read from the store (placeholder until the report work lands)."""

from __future__ import annotations


def build_summary(con, capture_ids) -> dict:
    """Header facts and chart series for ``capture_ids``; see the report templates for the keys used."""
    return {}
