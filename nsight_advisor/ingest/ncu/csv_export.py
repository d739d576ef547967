"""Read ``ncu --csv`` output: the details page (both header layouts), the raw page and the summary page.

Layouts (see shared/reference/ncu-export.md §1):

* details, long form: one row per (result ID, metric), plus rule rows. 2022.3 and older have ``Kernel Time``;
  2024.1 and newer add ``Block Size, Grid Size, Device, CC`` and the two speedup columns; ``--print-details``
  adds ``Body Item Label``. ``Metric Name`` holds a label, a metric name or ``Label (name)``.
* raw, wide form: one column per metric name, a units row, then one row per result.
* summary (``--print-summary per-kernel``): one row per (kernel configuration, metric) with Min/Max/Average.
* session: not kernel data; refused with the command that exports kernel data instead.

Values are converted to base units from the unit column; thousands separators (``14,120``) and decimal commas
(``10,72``, detected per file) are handled; ``n/a`` and empty cells are NULL; instanced cells
(``732000 (FFMA: 409600; ...)``) keep their aggregate. Warning lines before the header are skipped.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Iterable

import duckdb

from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.ncu.labels import NOT_A_SECTION, SECTION_IDS, metric_for_label
from nsight_advisor.ingest.ncu.rows import NcuCapture, NcuKernel, write_capture
from nsight_advisor.ingest.ncu.units import unit_factor

# Columns that describe the result rather than a metric (raw page); everything else in a raw header is a metric.
FIXED_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
                 "Block Size", "Grid Size", "Device", "Device Id", "CC", "Invocations"}
_RULE_TYPES = {"OPT": "optimization", "WRN": "warning", "INF": "ok", "ERR": "error", "OK": "ok"}
_DIMS = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)$")
# A decimal comma shows as '10,72' or '1.234,5' or '1.234.567'; a thousands comma as '8,348.53' or '1,234,567'.
_DE_ONLY = re.compile(r"^-?(\d+,(\d{1,2}|\d{4,})|\d{1,3}(\.\d{3}){2,}(,\d+)?|\d{1,3}(\.\d{3})+,\d+)$")
_EN_ONLY = re.compile(r"^-?(\d+\.(\d{1,2}|\d{4,})|\d{1,3}(,\d{3}){2,}(\.\d+)?|\d{1,3}(,\d{3})+\.\d+)$")
SESSION_HINT = ("export kernel data instead: `ncu --import REPORT.ncu-rep --csv --page raw --print-units base` "
                "(or --page details)")


def ingest_ncu_csv(con: duckdb.DuckDBPyConnection, capture_id: int, path: Path, *, progress: bool = False) -> None:
    """Fill ncu_kernels, ncu_metrics, ncu_rule_results, gpus and captures from one ``ncu --csv`` file.

    Raises InputError (one line naming the file) for the session page, a file without an ncu CSV header,
    or a header without result rows.
    """
    path = Path(path)
    rows = _read_rows(path)
    header_at = _find_header(path, rows)
    header = [h.strip() for h in rows[header_at]]
    body = rows[header_at + 1:]
    reader = _CsvReader(path, header, body)
    if "Metric Value" in header and "Metric Name" in header:
        cap = reader.details()
    elif "Average" in header and "Metric Name" in header:
        cap = reader.summary()
    else:
        cap = reader.raw()
    if not cap.kernels:
        raise InputError(f"{path}: ncu CSV header found but no result rows below it")
    write_capture(con, capture_id, cap)


def _read_rows(path: Path) -> list[list[str]]:
    try:
        data = path.read_bytes()
        # ncu writes UTF-8; a file saved again by a Windows tool (PowerShell's >, Excel) may be UTF-16 with a BOM
        encoding = "utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
        text = data.decode(encoding, errors="replace")
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return [row for row in csv.reader(io.StringIO(text, newline=""))]
    except csv.Error as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc})") from None


def _find_header(path: Path, rows: list[list[str]]) -> int:
    """Index of the header row: the first row starting with "ID" (result pages) or "Process ID" (summary)."""
    for i, row in enumerate(rows):
        first = row[0].strip() if row else ""
        if first in ("ID", "Process ID") and len(row) > 3:
            return i
        if first in ("Launch Settings", "Session Info", "Launch Attribute", "Session Attribute"):
            raise InputError(f"{path}: this is the ncu session page (launch settings, session info, device "
                             f"attributes), not kernel data; {SESSION_HINT}")
    if not any(any(cell.strip() for cell in row) for row in rows):
        raise InputError(f"{path}: empty CSV, no ncu output in it")
    raise InputError(f"{path}: no ncu CSV header (a line starting with \"ID\" or \"Process ID\"); expected "
                     "`ncu --csv --page raw|details` output")


class _CsvReader:
    def __init__(self, path: Path, header: list[str], body: list[list[str]]) -> None:
        self.path = path
        self.header = header
        self.col = {name: i for i, name in reversed(list(enumerate(header)))}
        self.body = body
        # only metric value cells tell the locale (CC "7.5" and IDs are printed the same in every locale)
        value_cols = [self.col[c] for c in ("Metric Value", "Minimum", "Maximum", "Average") if c in self.col] or \
            [i for i, name in enumerate(header) if name and name not in FIXED_COLUMNS]
        self.decimal_comma = _detect_decimal_comma(row[i] for row in body for i in value_cols if i < len(row))

    def cell(self, row: list[str], name: str) -> str:
        i = self.col.get(name)
        return row[i].strip() if i is not None and i < len(row) else ""

    def number(self, text: str) -> float | None:
        return parse_number(text, decimal_comma=self.decimal_comma)

    def _layout_note(self, page: str) -> tuple[str, int, str]:
        era = ("2024.1+ header (Block Size, Grid Size, Device, CC)" if "CC" in self.col
               else "2022.3-and-older header (Kernel Time)" if "Kernel Time" in self.col else "header without launch columns")
        extra = ", decimal commas" if self.decimal_comma else ""
        return ("ncu_metrics", 0, f"ncu CSV {page} page, {era}{extra}; ncu version not recorded in CSV output")

    def _kernel(self, kernel_id: int, launch_id: int | None, row: list[str]) -> NcuKernel:
        return NcuKernel(
            kernel_id=kernel_id, launch_id=launch_id, name=self.cell(row, "Kernel Name") or None,
            pid=_int(self.cell(row, "Process ID")), stream_id=_int(self.cell(row, "Stream")),
            grid=_dims(self.cell(row, "Grid Size")), block=_dims(self.cell(row, "Block Size")),
            device_id=_int(self.cell(row, "Device") or self.cell(row, "Device Id")),
            compute_capability=self.cell(row, "CC") or None,
        )

    def _metric_row(self, kernel_id: int, metric: str, raw_value: str, unit: str):
        factor, base = unit_factor(unit)
        value = self.number(raw_value)
        if value is not None:
            return (kernel_id, metric, value * factor, base, None)
        text = raw_value.strip()
        return (kernel_id, metric, None, base, text if text and text.lower() != "n/a" else None)

    # ------------------------------------------------------------------ details (long form)
    def details(self) -> NcuCapture:
        cap = NcuCapture(self.path, "ncu-csv", "unknown", [], [], notes=[self._layout_note("details")])
        kernels: dict[int, NcuKernel] = {}
        sections: dict[int, set[str]] = {}
        skipped = 0
        min_fields = self.col["Metric Value"] + 1
        for row in self.body:
            rid = _int(self.cell(row, "ID"))
            if rid is None or len(row) < min_fields:  # free text and the NUMA table of --print-details all
                skipped += any(c.strip() for c in row)
                continue
            if rid not in kernels:
                kernels[rid] = self._kernel(rid, rid, row)
                sections[rid] = set()
            section = self.cell(row, "Section Name")
            rule = self.cell(row, "Rule Name")
            label = self.cell(row, "Metric Name")
            if rule and not label:
                cap.rules.append(self._rule(rid, section, rule, row))
                sections[rid].add(section)  # rule rows name the section by its identifier
                continue
            if not label:
                continue
            if section not in NOT_A_SECTION:
                sections[rid].add(SECTION_IDS.get(section, section))
            body_item = self.cell(row, "Body Item Label")
            unit = self.cell(row, "Metric Unit")
            scope = f"{section}/{body_item}" if body_item else section
            metric = metric_for_label(label, unit_factor(unit)[1], scope)
            cap.metrics.append(self._metric_row(rid, metric, self.cell(row, "Metric Value"), unit))
        for rid, k in kernels.items():
            k.sections = sorted(s for s in sections[rid] if s)
        cap.kernels = list(kernels.values())
        if skipped:
            cap.notes.append(("ncu_metrics", skipped, "lines that are not result rows (free text and tables of --print-details all) skipped"))
        return cap

    def _rule(self, rid: int, section: str, rule: str, row: list[str]) -> dict:
        speedup = self.number(self.cell(row, "Estimated Speedup"))
        rtype = self.cell(row, "Rule Type")
        return {
            "kernel_id": rid, "section": section or None, "rule_id": rule, "title": None,
            "result_type": _RULE_TYPES.get(rtype.upper(), rtype.lower() or None),
            "message": self.cell(row, "Rule Description") or None,
            "estimated_speedup_pct": speedup,
            "speedup_type": self.cell(row, "Estimated Speedup Type").lower() or None,
            "focus_metrics": None,
        }

    # ------------------------------------------------------------------ raw (wide form)
    def raw(self) -> NcuCapture:
        cap = NcuCapture(self.path, "ncu-csv", "unknown", [], [], notes=[self._layout_note("raw")])
        metric_cols = [(i, name) for i, name in enumerate(self.header)
                       if name and name not in FIXED_COLUMNS and not _is_nvtx_column(name)]
        if not metric_cols:
            raise InputError(f"{self.path}: ncu CSV header has no metric columns")
        units: list[str] = [""] * len(self.header)
        for row in self.body:
            rid_text = self.cell(row, "ID")
            rid = _int(rid_text)
            if rid is None:
                if not rid_text and any(c.strip() for c in row):
                    units = [c.strip() for c in row] + [""] * max(0, len(self.header) - len(row))  # the units row
                continue
            kernel_id = len(cap.kernels)
            cap.kernels.append(self._kernel(kernel_id, rid, row))
            for i, name in metric_cols:
                if i < len(row) and row[i].strip() != "":
                    cap.metrics.append(self._metric_row(kernel_id, name, row[i], units[i]))
        return cap

    # ------------------------------------------------------------------ summary (per-kernel aggregates)
    def summary(self) -> NcuCapture:
        cap = NcuCapture(self.path, "ncu-csv", "unknown", [], [], notes=[self._layout_note("summary")])
        keys: dict[tuple, int] = {}
        for row in self.body:
            if not self.cell(row, "Metric Name"):
                continue
            key = tuple(self.cell(row, c) for c in ("Process ID", "Kernel Name", "Block Size", "Grid Size", "Device", "Device Id"))
            if key not in keys:
                keys[key] = len(keys)
                cap.kernels.append(self._kernel(keys[key], None, row))
            kid = keys[key]
            unit = self.cell(row, "Metric Unit")
            metric = metric_for_label(self.cell(row, "Metric Name"), unit_factor(unit)[1], self.cell(row, "Section Name"))
            cap.metrics.append(self._metric_row(kid, metric, self.cell(row, "Average"), unit))
        if cap.kernels:
            cap.notes.append(("ncu_kernels", len(cap.kernels), "summary page: one row per kernel configuration; "
                              "metric values are the Average over its invocations (Minimum/Maximum not stored)"))
        return cap


def parse_number(text: str, *, decimal_comma: bool = False) -> float | None:
    """A number as ncu prints it, or None (empty, ``n/a``, or not a number).

    Instanced cells keep their aggregate: ``"732000 (FFMA: 409600; ...)"`` → 732000.0.
    """
    s = text.strip()
    if not s or s.lower() == "n/a":
        return None
    if " (" in s:
        s = s.split(" (", 1)[0]
    s = s.replace(".", "").replace(",", ".") if decimal_comma else s.replace(",", "")
    try:
        return float(s)
    except ValueError:
        return None


def _detect_decimal_comma(cells: Iterable[str]) -> bool:
    de = en = 0
    for cell in cells:
        c = cell.strip()
        if not c or not c[0].isdigit() and c[0] != "-":
            continue
        if _DE_ONLY.match(c):
            de += 1
        elif _EN_ONLY.match(c):
            en += 1
    return de > en


def _int(text: str) -> int | None:
    try:
        value = int(text.replace(",", "").strip())
    except (ValueError, AttributeError):
        return None
    return value if -(2**63) <= value < 2**63 else None  # not a number ncu prints: unreadable, not made up


def _dims(text: str) -> tuple[int, int, int] | None:
    m = _DIMS.match(text.replace(",", ", ").replace("  ", " ")) if text else None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _is_nvtx_column(name: str) -> bool:
    return name.startswith(("thread Domain", "Id:Domain")) or ":Push/Pop_Range" in name


__all__ = ["ingest_ncu_csv", "parse_number", "FIXED_COLUMNS"]
