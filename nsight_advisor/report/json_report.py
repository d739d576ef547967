"""``--format json``: the JSON contract (``AnalysisResult.to_dict()``), strict JSON, with its JSON Schema.

The schema ships beside this module as ``analysis.schema.json``; tests validate real outputs against it.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from nsight_advisor.report.data import as_dict, jsonable

SCHEMA_FILE = "analysis.schema.json"


def render_json(result: Any) -> str:
    """The analysis as indented, strict JSON (no NaN or Infinity: unknown numbers are null)."""
    return json.dumps(jsonable(as_dict(result)), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the JSON contract."""
    text = resources.files("nsight_advisor.report").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)
