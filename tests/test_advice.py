"""Advice that fits the program and the GPU: stack and capability views, fix variants, and every fix shown on
every real capture checked against the capture's stack and its GPUs' capabilities."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TRACES, ncu_csvs, ncu_reports, nsys_exports, trace_param
from rules_real import analyzed

from nsight_advisor.engine.advice import CAPABILITIES, STACKS, FixClause, Profile, select_fix, text_tags
from nsight_advisor.authoring.cases import empty_store
from nsight_advisor.common.errors import InputError


ALL_CAPTURES = nsys_exports() + ncu_reports() + ncu_csvs()


def _rel(path: Path) -> str:
    return str(path.relative_to(TRACES))


@pytest.mark.parametrize("path", trace_param(ALL_CAPTURES))
def test_every_fix_shown_fits_the_captures_stack_and_gpu(path):
    try:
        result, _ = analyzed(_rel(path))
    except InputError as exc:  # an ncu CSV page that holds no kernels (session, summary)
        pytest.skip(f"not a capture the store takes: {exc}")
    captures = {c["capture_id"]: c for c in result.captures}
    for finding in result.findings:
        cap = captures[finding.capture_id]
        stack = cap["program"]["stack"]
        gpus = cap["gpus"]
        caps = set.intersection(*(set(g.get("capabilities") or []) for g in gpus)) if gpus else set()
        said_stacks, said_caps = text_tags(finding.fix)
        assert said_stacks <= {stack}, (finding.rule_name, stack, said_stacks, finding.fix)
        assert said_caps <= caps, (finding.rule_name, [g.get("name") for g in gpus], said_caps, finding.fix)


@pytest.mark.parametrize(("name", "stack", "evidence"), [
    ("nsys/nsu_v100_openacc.sqlite", "openacc-openmp", "_gpu"),
    ("nsys/fuser_h200_matmul.sqlite", "pytorch", "at::native"),
    ("nsys/nsys_ai_h100_2gpu_1s.sqlite", "pytorch", "at::native"),
    ("nsys/memfusion.sqlite", "tensorrt", "TensorRT"),
    ("nsys/recon_stream.sqlite", "cupy-numba", "cupy_"),
    ("nsys/pipit_cloverleaf_a100.sqlite", "cuda-cpp", "plain CUDA"),
    ("ncu/esmm_a10g_sgemm.ncu-rep", "cuda-cpp", "plain CUDA"),
    ("ncu/sglang_h800_flashattn.ncu-rep", "pytorch", "at::native"),
])
def test_stack_from_evidence(name, stack, evidence):
    if not (TRACES / name).exists():
        pytest.skip(f"{name} not in ../shared/traces")
    result, _ = analyzed(name)
    program = result.captures[0]["program"]
    assert program["stack"] == stack
    assert evidence in program["evidence"]


_DL_GUIDE_PREFIXES = ("mixed-precision.", "memory-limited.", "convolution.", "fully-connected.", "recurrent.")


@pytest.mark.parametrize("path", trace_param(ALL_CAPTURES))
def test_cited_principles_fit_the_captures_stack_and_gpu(path):
    try:
        result, _ = analyzed(_rel(path))
    except InputError as exc:
        pytest.skip(f"not a capture the store takes: {exc}")
    captures = {c["capture_id"]: c for c in result.captures}
    for finding in result.findings:
        cap = captures[finding.capture_id]
        ids = [p.id for p in finding.principles]
        assert ids, finding.rule_name
        if cap["program"]["stack"] in ("cuda-cpp", "openacc-openmp", "cuda-fortran", "julia", "cupy-numba"):
            assert not [i for i in ids if i.startswith(_DL_GUIDE_PREFIXES)] or len(ids) == 1, (finding.rule_name, ids)
        caps = set.intersection(*(set(g.get("capabilities") or []) for g in cap["gpus"])) if cap["gpus"] else set()
        if "tf32" not in caps:
            assert "mixed-precision.tf32" not in ids
        if "fp8" not in caps:
            assert "mixed-precision.fp8-hopper" not in ids


def test_openacc_capture_gets_no_pytorch_advice():
    name = "nsys/nsu_v100_openacc.sqlite"
    if not (TRACES / name).exists():
        pytest.skip(f"{name} not in ../shared/traces")
    result, _ = analyzed(name)
    assert result.findings, "the OpenACC capture has findings to check"
    for finding in result.findings:
        assert "pytorch" not in text_tags(finding.fix)[0], (finding.rule_name, finding.fix)
        assert "torch" not in finding.fix.lower()


@pytest.mark.parametrize(("name", "has", "lacks"), [
    ("ncu/cuda_mlp_inference.ncu-rep", {"fp16-tensor", "int8-tensor"}, {"tf32", "bf16", "fp8"}),   # T4, CC 7.5
    ("ncu/esmm_a10g_sgemm.ncu-rep", {"tf32", "bf16"}, {"fp8", "fp64-tensor"}),                       # A10G, CC 8.6
    ("ncu/sglang_h800_flashattn.ncu-rep", {"fp8", "bf16", "fp64-tensor"}, {"fp4"}),                   # H800, CC 9.0
    ("ncu/jaxtoolbox_gb200_cuda_graph.ncu-rep", {"fp4", "fp6", "fp8"}, set()),                        # GB200, CC 10.0
])
def test_gpu_capabilities_follow_compute_capability(name, has, lacks):
    if not (TRACES / name).exists():
        pytest.skip(f"{name} not in ../shared/traces")
    result, _ = analyzed(name)
    caps = set(result.captures[0]["gpus"][0]["capabilities"])
    assert has <= caps and not (lacks & caps)
    assert caps <= set(CAPABILITIES)


def test_capabilities_per_cc_and_unknown_cc():
    con = empty_store()
    rows = [(1, 0, "V100", "7.0"), (1, 1, "T4", "7.5"), (1, 2, "P100", "6.0"), (1, 3, "mystery", None),
            (1, 4, "RTX 4090", "8.9")]
    for cid, dev, name, cc in rows:
        con.execute("insert into gpus (capture_id, device_id, name, compute_capability) values (?, ?, ?, ?)",
                    [cid, dev, name, cc])
    got = {r[0]: (set(r[1]), r[2]) for r in con.execute(
        "select name, capabilities, tensor_cores from gpu_capabilities").fetchall()}
    assert got["V100"] == ({"tensor-cores", "fp16-tensor"}, True)
    assert got["T4"][0] == {"tensor-cores", "fp16-tensor", "int8-tensor", "int4-tensor"}
    assert got["P100"] == (set(), False)
    assert got["mystery"] == (set(), None)
    assert {"fp8", "bf16", "tf32"} <= got["RTX 4090"][0] and "fp64-tensor" not in got["RTX 4090"][0]


def test_select_fix_picks_the_variant_and_only_usable_clauses():
    clauses = (FixClause("Use BF16.", ("bf16",), ("pytorch",)), FixClause("Use FP8.", ("fp8",)),
               FixClause("Torch only.", (), ("pytorch",)))
    variants = {"pytorch": "Fuse with torch.compile."}
    turing_torch = Profile("pytorch", frozenset({"tensor-cores", "fp16-tensor"}))
    hopper_torch = Profile("pytorch", frozenset({"bf16", "fp8"}))
    hopper_acc = Profile("openacc-openmp", frozenset({"bf16", "fp8"}))
    assert select_fix("Fuse.", variants, clauses, turing_torch) == "Fuse with torch.compile. Torch only."
    assert select_fix("Fuse.", variants, clauses, hopper_torch) == \
        "Fuse with torch.compile. Use BF16. Use FP8. Torch only."
    assert select_fix("Fuse.", variants, clauses, hopper_acc) == "Fuse. Use FP8."
    assert select_fix("Fuse.", variants, clauses, Profile()) == "Fuse."


def test_text_tags_names_stack_and_capability_words():
    assert text_tags("avoid .item() in the loop") == ({"pytorch"}, set())
    assert text_tags("enable TF32, or BF16 autocast") == ({"pytorch"}, {"tf32", "bf16"})
    assert text_tags("set vector_length(128)") == ({"openacc-openmp"}, set())
    assert text_tags("use cudaMemcpyAsync") == (set(), set())
    assert set(STACKS) >= {"pytorch", "openacc-openmp", "cuda-cpp"}


def _rule_copy(tmp_path, fix_block: str) -> Path:
    """rules/small-grid copied with its [finding.fix] table replaced by ``fix_block``."""
    import re
    import shutil

    src = Path(__file__).resolve().parent.parent / "rules" / "small-grid"
    dst = tmp_path / "small-grid"
    shutil.copytree(src, dst)
    toml = (dst / "rule.toml").read_text(encoding="utf-8")
    toml = re.sub(r"\[finding\.fix\].*?(?=\n\[docs\])", fix_block, toml, flags=re.S)
    toml = toml.replace('id = "NA101"', 'id = "NA901"')
    (dst / "rule.toml").write_text(toml, encoding="utf-8")
    return dst


def test_lint_rejects_stack_and_capability_words_shown_too_widely(tmp_path):
    from nsight_advisor.authoring.lint import lint_folders

    bad = _rule_copy(tmp_path, '[finding.fix]\ntext = "Use torch.compile and BF16 activations."\n')
    _, problems = lint_folders([bad])
    texts = [str(p) for p in problems]
    assert any("specific to pytorch" in t for t in texts), texts
    assert any("recommends bf16" in t for t in texts), texts


def test_lint_accepts_the_same_words_in_a_variant_and_a_clause(tmp_path):
    from nsight_advisor.authoring.lint import lint_folders

    good = _rule_copy(tmp_path, '[finding.fix]\ntext = "Launch more blocks."\n\n[finding.fix.variants]\n'
                      'pytorch = "Use torch.compile."\n\n[[finding.fix.clauses]]\ntext = "Keep activations in BF16."\n'
                      'needs = ["bf16"]\n')
    rules, problems = lint_folders([good])
    assert not problems, [str(p) for p in problems]
    assert rules[0].finding.fix_variants == (("pytorch", "Use torch.compile."),)


@pytest.mark.parametrize(("block", "message"), [
    ('[finding.fix]\ntext = "x"\n[finding.fix.variants]\npytorh = "y"\n', "'pytorh' is not a stack"),
    ('[finding.fix]\ntext = "x"\n[[finding.fix.clauses]]\ntext = "y"\nneeds = ["bf17"]\n',
     "'bf17' is not a GPU capability"),
    ('[finding.fix]\ntext = "x"\n[[finding.fix.clauses]]\ntext = "y"\n', "needs a capability or a stack"),
])
def test_malformed_fix_tables_fail_at_load_naming_the_key(tmp_path, block, message):
    from nsight_advisor.engine.rules import load_rule
    from nsight_advisor.common.errors import RuleError

    with pytest.raises(RuleError, match=message):
        load_rule(_rule_copy(tmp_path, block))
