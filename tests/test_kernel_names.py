"""A kernel's short name (ingest/kernel_names.py) against its definition written one character at a time."""

from __future__ import annotations

import random

import pytest

from nsight_advisor.ingest.kernel_names import short_kernel_name


def _reference(name):
    """The definition: the last balanced (...) at the end dropped, then every <...> at every depth (an unmatched
    ">" dropped too), then what follows the last space and the last "::"."""
    if not name:
        return name
    text = name.strip()
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:i]
                break
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    text = "".join(out).strip()
    text = text.split(" ")[-1] if " " in text else text
    text = text.split("::")[-1] if "::" in text else text
    return text or name


@pytest.mark.parametrize("name, short", [
    ("void computeValue<float>(unsigned int*, curandStateXORWOW*, unsigned int)", "computeValue"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
     "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)", "vectorized_elementwise_kernel"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ("main_46_gpu", "main_46_gpu"),
    ("operator()", "operator"),
    ("", ""),
    (None, None),
])
def test_known_names(name, short):
    assert short_kernel_name(name) == short == _reference(name)


def test_random_names_follow_the_definition():
    rng = random.Random(30)
    alphabet = "ab<<>>(()) ::,*&v"
    for _ in range(20_000):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert short_kernel_name(name) == _reference(name), name
