"""Our kernels/api_calls/memcpys against NVIDIA's own `nsys stats` output for the same exports (answers/NAME/*.csv).

Quirks of those files (nsys 2022.4.2, see ../shared/traces/README.md): gpukernsum splits one kernel name
into a row per grid/block configuration (we sum them), and cudaapisum strips the `_vNNNN` suffix only from
the APIs it knows, so both sides are compared with suffixes stripped. gpumemtimesum names copies with the
short direction words of that nsys release (HtoD, ...), mapped here to the export's enum labels we store.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import TRACES, trace_param
from nsight_advisor.ingest.nsys.export import ingest_nsys_sqlite
from nsight_advisor.store.database import connect

ANSWERS = TRACES / "answers"


def _answered(report: str) -> list[Path]:
    if not ANSWERS.exists():
        return []
    return sorted(p for p in (TRACES / "nsys").glob("*.sqlite") if (ANSWERS / p.stem / f"{report}.csv").exists())


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _strip_version(name: str) -> str:
    return re.sub(r"_v\d+$", "", name)


@pytest.fixture
def store():
    con = connect(None)
    yield con
    con.close()


@pytest.mark.parametrize("export", trace_param(_answered("gpukernsum")))
def test_kernel_totals_equal_nsys_stats(export: Path, store) -> None:
    expected: dict[str, list[int]] = {}
    for row in _rows(ANSWERS / export.stem / "gpukernsum.csv"):
        count, total, lo, hi = (int(row[k]) for k in ("Instances", "Total Time (ns)", "Min (ns)", "Max (ns)"))
        if row["Name"] in expected:  # one row per grid/block configuration: merge
            e = expected[row["Name"]]
            expected[row["Name"]] = [e[0] + count, e[1] + total, min(e[2], lo), max(e[3], hi)]
        else:
            expected[row["Name"]] = [count, total, lo, hi]
    ingest_nsys_sqlite(store, 1, export)
    got = {name: [c, t, lo, hi] for name, c, t, lo, hi in store.execute(
        "SELECT name, count(*), sum(duration_ns), min(duration_ns), max(duration_ns) FROM kernels GROUP BY name"
    ).fetchall()}
    assert got == expected


@pytest.mark.parametrize("export", trace_param(_answered("cudaapisum")))
def test_api_totals_equal_nsys_stats(export: Path, store) -> None:
    expected: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in _rows(ANSWERS / export.stem / "cudaapisum.csv"):
        e = expected[_strip_version(row["Name"])]
        e[0] += int(row["Num Calls"])
        e[1] += int(row["Total Time (ns)"])
    ingest_nsys_sqlite(store, 1, export)
    got: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name, count, total in store.execute(
        "SELECT name, count(*), sum(duration_ns) FROM api_calls GROUP BY name"
    ).fetchall():
        g = got[_strip_version(name)]
        g[0] += count
        g[1] += int(total)
    assert dict(got) == dict(expected)


_NSYS_2022_DIRECTIONS = {
    "CUDA memcpy HtoD": "Host-to-Device", "CUDA memcpy DtoH": "Device-to-Host", "CUDA memcpy DtoD": "Device-to-Device",
    "CUDA memcpy HtoH": "Host-to-Host", "CUDA memcpy PtoP": "Peer-to-Peer",
    "CUDA Unified Memory memcpy HtoD": "Unified Host-to-Device",
    "CUDA Unified Memory memcpy DtoH": "Unified Device-to-Host",
    "CUDA Unified Memory memcpy DtoD": "Unified Device-to-Device",
}


@pytest.mark.parametrize("export", trace_param(_answered("gpumemtimesum")))
def test_copy_totals_equal_nsys_stats(export: Path, store) -> None:
    expected = {}
    for row in _rows(ANSWERS / export.stem / "gpumemtimesum.csv"):
        op = row["Operation"].strip("[]")
        key = "memset" if op == "CUDA memset" else _NSYS_2022_DIRECTIONS[op]
        expected[key] = [int(row["Count"]), int(row["Total Time (ns)"])]
    ingest_nsys_sqlite(store, 1, export)
    got = {d: [c, int(t)] for d, c, t in store.execute(
        "SELECT direction, count(*), sum(duration_ns) FROM memcpys GROUP BY 1 UNION ALL "
        "SELECT 'memset', count(*), sum(duration_ns) FROM memsets HAVING count(*) > 0").fetchall()}
    assert got == expected
