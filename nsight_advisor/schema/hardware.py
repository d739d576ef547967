"""Peak numbers of NVIDIA GPUs, keyed by the name a capture records.

Exports record SM count, clocks and often DRAM bandwidth, but never peak FLOP/s, so the roofline and
ops:byte ridge need this table. Numbers are dense (no 2:4 sparsity), in base units, from NVIDIA's
datasheets as gathered in ``shared/reference/guide-principles.md`` §9 (G = stated in the DL performance
guides, D = datasheet). Consumer GPUs use the datasheet boost-clock numbers. Unknown GPUs get ``None``:
a rule that needs a peak is then skipped rather than guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

T = 1e12
GB_S = 1e9


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet numbers of one GPU model (FLOP/s and bytes/s, dense)."""

    key: str
    sm_count: int
    compute_capability: str
    dram_bytes_per_s: float
    fp32_flops_per_s: float
    fp16_tensor_flops_per_s: float | None
    tf32_tensor_flops_per_s: float | None
    fp8_tensor_flops_per_s: float | None = None
    fp64_flops_per_s: float | None = None


# Order matters: the first pattern that matches the lower-cased name wins, so specific SKUs come first.
_SPECS: tuple[tuple[str, GpuSpec], ...] = (
    (r"gb200|b200", GpuSpec("B200", 148, "10.0", 8000 * GB_S, 80 * T, 2250 * T, 1100 * T, 4500 * T, 40 * T)),
    (r"gh200", GpuSpec("GH200", 132, "9.0", 4000 * GB_S, 67 * T, 989 * T, 495 * T, 1979 * T, 34 * T)),
    (r"h200", GpuSpec("H200 SXM", 132, "9.0", 4800 * GB_S, 67 * T, 989 * T, 495 * T, 1979 * T, 34 * T)),
    (r"h100.*pcie", GpuSpec("H100 PCIe", 114, "9.0", 2000 * GB_S, 51 * T, 756 * T, 378 * T, 1513 * T, 26 * T)),
    (r"h100 nvl", GpuSpec("H100 NVL", 132, "9.0", 3900 * GB_S, 67 * T, 989 * T, 495 * T, 1979 * T, 34 * T)),
    (r"h100|h800", GpuSpec("H100 SXM", 132, "9.0", 3350 * GB_S, 67 * T, 989 * T, 495 * T, 1979 * T, 34 * T)),
    (r"a100.*80gb.*pcie|a100.*pcie.*80gb", GpuSpec("A100 80GB PCIe", 108, "8.0", 1935 * GB_S, 19.5 * T, 312 * T, 156 * T, None, 9.7 * T)),
    (r"a100.*80gb", GpuSpec("A100 80GB SXM4", 108, "8.0", 2039 * GB_S, 19.5 * T, 312 * T, 156 * T, None, 9.7 * T)),
    (r"a100", GpuSpec("A100 40GB", 108, "8.0", 1555 * GB_S, 19.5 * T, 312 * T, 156 * T, None, 9.7 * T)),
    (r"a800", GpuSpec("A800", 108, "8.0", 2039 * GB_S, 19.5 * T, 312 * T, 156 * T, None, 9.7 * T)),
    (r"a40\b", GpuSpec("A40", 84, "8.6", 696 * GB_S, 37.4 * T, 149.7 * T, 74.8 * T)),
    (r"a10g", GpuSpec("A10G", 80, "8.6", 600 * GB_S, 31.2 * T, 70 * T, 35 * T)),
    (r"a10\b", GpuSpec("A10", 72, "8.6", 600 * GB_S, 31.2 * T, 125 * T, 62.5 * T)),
    (r"rtx a5000", GpuSpec("RTX A5000", 64, "8.6", 768 * GB_S, 27.8 * T, 111.1 * T, 55.6 * T)),
    (r"l40s", GpuSpec("L40S", 142, "8.9", 864 * GB_S, 91.6 * T, 362 * T, 183 * T, 733 * T)),
    (r"l4\b", GpuSpec("L4", 58, "8.9", 300 * GB_S, 30.3 * T, 121 * T, 60 * T, 242 * T)),
    (r"rtx 4090", GpuSpec("RTX 4090", 128, "8.9", 1008 * GB_S, 82.6 * T, 165.2 * T, 82.6 * T, 330 * T)),
    (r"rtx 4070", GpuSpec("RTX 4070", 46, "8.9", 504 * GB_S, 29.1 * T, 58.3 * T, 29.1 * T, 116.6 * T)),
    (r"rtx 3090", GpuSpec("RTX 3090", 82, "8.6", 936 * GB_S, 35.6 * T, 71 * T, 35.6 * T)),
    (r"rtx 3080", GpuSpec("RTX 3080", 68, "8.6", 760 * GB_S, 29.8 * T, 59.5 * T, 29.8 * T)),
    (r"rtx 3060 laptop", GpuSpec("RTX 3060 Laptop", 30, "8.6", 336 * GB_S, 10.9 * T, 21.8 * T, 10.9 * T)),
    (r"rtx 3060", GpuSpec("RTX 3060", 28, "8.6", 360 * GB_S, 12.7 * T, 25.5 * T, 12.7 * T)),
    (r"rtx 2080 ti", GpuSpec("RTX 2080 Ti", 68, "7.5", 616 * GB_S, 13.4 * T, 53.8 * T, None)),
    (r"rtx 2060 super", GpuSpec("RTX 2060 SUPER", 34, "7.5", 448 * GB_S, 7.2 * T, 28.7 * T, None)),
    (r"\bt4\b", GpuSpec("T4", 40, "7.5", 320 * GB_S, 8.1 * T, 65 * T, None)),
    (r"v100s", GpuSpec("V100S PCIe", 80, "7.0", 1134 * GB_S, 16.4 * T, 130 * T, None, None, 8.2 * T)),
    (r"v100.*pcie", GpuSpec("V100 PCIe", 80, "7.0", 900 * GB_S, 14 * T, 112 * T, None, None, 7 * T)),
    (r"v100", GpuSpec("V100 SXM2", 80, "7.0", 900 * GB_S, 15.7 * T, 125 * T, None, None, 7.8 * T)),
)


def lookup_gpu(name: str | None) -> GpuSpec | None:
    """The datasheet numbers for a GPU name as recorded (e.g. 'NVIDIA A100-SXM4-40GB'), or None."""
    if not name:
        return None
    lowered = name.lower().replace("-", " ").replace("_", " ")
    for pattern, spec in _SPECS:
        if re.search(pattern, lowered):
            return spec
    return None


def known_models() -> list[str]:
    """The model names of the built-in table, as ``--gpu`` accepts them."""
    return [spec.key for _, spec in _SPECS]
