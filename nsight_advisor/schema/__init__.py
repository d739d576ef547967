"""The normalized schema every rule reads: tables, their columns, units and meanings.

Rules read only these tables and views, never an export's raw tables, so one rule works on every
Nsight Systems version and on both tools' data. ``tables.TABLES`` is the single source of truth;
``create_schema`` turns it into DuckDB DDL with a comment on every column.
"""

from nsight_advisor.schema.tables import TABLES, Column, Table, create_schema, table_names

__all__ = ["TABLES", "Column", "Table", "create_schema", "table_names"]
