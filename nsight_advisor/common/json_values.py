"""One conversion of anything a query, a finding or a report holds into plain JSON values."""

from __future__ import annotations

import datetime as _dt
import decimal
import math
from typing import Any, Mapping


def jsonable(value: Any) -> Any:
    """``value`` with every leaf a JSON value: NaN/inf -> None, Decimal -> float, dates -> ISO text, timedeltas ->
    seconds, bytes -> text (invalid UTF-8 replaced), numpy scalars -> Python numbers, objects with ``to_dict``
    -> their dict, anything else -> ``str``."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        return jsonable(float(value))
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return jsonable(item())
        except (TypeError, ValueError):
            pass
    if hasattr(value, "to_dict"):
        return jsonable(value.to_dict())
    return str(value)
