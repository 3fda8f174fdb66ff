"""The benchmark command (benchmarks/): its contenders, the sweep, its files, plots and summaries."""

from __future__ import annotations

import csv
import json
import re

import matplotlib.pyplot as plt
import pandas as pd
import pytest
import torch
from conftest import ROOT

from benchmarks import runner as runner_module
from benchmarks.__main__ import default_out, main, print_note
from benchmarks.contenders import Case, make_step
from benchmarks.plots import plot_results
from benchmarks.report import environment_report
from benchmarks.results import COLUMNS
from benchmarks.runner import BenchConfig, is_out_of_memory, run
from benchmarks.summary import best_peak_fraction, speedup
from helpers.kit.bench import attention_flops

CPU = torch.device("cpu")


# --- out of memory, and the report of what ran -------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "CUDA out of memory. Tried to allocate 2.00 GiB",
        "MPS backend out of memory (MPS allocated: 9.00 GB)",
        "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    ],
)
def test_allocation_failures_count_as_out_of_memory(message):
    assert is_out_of_memory(RuntimeError(message))


def test_other_errors_do_not_count_as_out_of_memory():
    assert not is_out_of_memory(RuntimeError("No available kernel. Aborting execution."))
    assert not is_out_of_memory(ValueError("out of memory"))  # only runtime errors


def test_environment_report_names_device_versions_date_and_command():
    report = environment_report(CPU, command="python -m benchmarks")
    assert report["device_type"] == "cpu" and report["torch"] == torch.__version__
    assert report["date_utc"][:2] == "20" and report["command"] == "python -m benchmarks"
    assert {"device_name", "driver", "cuda"} <= report.keys()


# --- the contenders compute the same layer -----------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_fused_contenders_give_the_same_output(causal):
    outputs = {}
    for name in ("fused_explicit", "fused_sdpa", "sdpa_functional"):
        torch.manual_seed(0)  # the same initial weights for each module
        case = Case(
            name,
            "-" if name == "fused_explicit" else "default",
            False,
            "float32",
            causal,
            "forward",
            2,
            8,
            16,
            4,
        )
        outputs[name] = make_step(case, CPU)()
    torch.testing.assert_close(outputs["fused_sdpa"], outputs["fused_explicit"])
    torch.testing.assert_close(outputs["sdpa_functional"], outputs["fused_explicit"])


def test_forward_backward_step_returns_a_gradient_for_input_and_every_parameter():
    grads = make_step(
        Case("fused_sdpa", "default", False, "float32", True, "forward_backward", 1, 8, 16, 2), CPU
    )()
    assert len(grads) == 1 + 4 and grads[0].shape == (1, 8, 16)


# --- the sweep ---------------------------------------------------------------------------------

TINY = dict(
    dtypes=("float32",),
    causal=(True,),
    modes=("forward",),
    seq_lens=(8, 16),
    batch=1,
    d_model=16,
    heads=(2,),
    min_run_time=0.005,
)


def test_missing_cuda_is_one_unavailable_row_not_a_crash():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    rows = run(BenchConfig(device="cuda", **TINY), progress=False)
    assert [(r["contender"], r["status"]) for r in rows] == [("all", "unavailable")]
    assert "cuda" in rows[0]["reason"]


def test_a_backend_that_cannot_run_is_reported_and_the_others_still_run():
    # On the CPU, sdpa_kernel(CUDNN_ATTENTION) leaves SDPA no kernel to run.
    rows = run(
        BenchConfig(contenders=("sdpa_direct",), backends=("cudnn", "math"), **TINY), progress=False
    )
    cudnn = [r for r in rows if r["backend"] == "cudnn"]
    math = [r for r in rows if r["backend"] == "math"]
    assert [r["status"] for r in cudnn] == ["unavailable"]  # one row: longer T not tried
    assert "RuntimeError" in cudnn[0]["reason"]
    assert [r["status"] for r in math] == ["ok", "ok"]


def test_out_of_memory_is_recorded_and_stops_that_series(monkeypatch):
    real = runner_module.make_step

    def runs_out_at_16(case, device):
        if case.seq_len >= 16:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
        return real(case, device)

    monkeypatch.setattr(runner_module, "make_step", runs_out_at_16)
    config = BenchConfig(contenders=("naive",), **{**TINY, "seq_lens": (8, 16, 32)})
    rows = run(config, progress=False)
    assert [(r["seq_len"], r["status"]) for r in rows] == [(8, "ok"), (16, "oom")]


def test_rows_hold_the_flop_count_and_the_rate_it_implies():
    rows = run(BenchConfig(contenders=("sdpa_direct", "fused_sdpa"), **TINY), progress=False)
    for row in rows:
        assert row["status"] == "ok"
        assert row["attn_flops"] == attention_flops(1, 2, row["seq_len"], 8, causal=True)
        assert row["tflops"] == pytest.approx(row["total_flops"] / (row["time_ms"] / 1e3) / 1e12)
        assert row["peak_mem_mib"] > 0 and row["peak_fraction"] is None  # CPU: no table peak
    direct = [r for r in rows if r["contender"] == "sdpa_direct"]
    assert all(r["total_flops"] == r["attn_flops"] for r in direct)


def test_explicit_path_memory_grows_with_t_squared_and_sdpa_memory_with_t():
    config = BenchConfig(
        contenders=("fused_explicit", "fused_sdpa"),
        **{**TINY, "causal": (False,), "seq_lens": (256, 512), "d_model": 32, "heads": (4,)},
    )
    mib = {(r["contender"], r["seq_len"]): r["peak_mem_mib"] for r in run(config, progress=False)}
    assert mib[("fused_explicit", 512)] / mib[("fused_explicit", 256)] > 3.5
    assert 1.5 < mib[("fused_sdpa", 512)] / mib[("fused_sdpa", 256)] < 2.5
    assert mib[("fused_sdpa", 512)] < mib[("fused_explicit", 512)] / 4


def test_compiled_contender_runs_at_tiny_size():
    rows = run(
        BenchConfig(contenders=("sdpa_direct",), compiled=(True,), **{**TINY, "seq_lens": (8,)}),
        progress=False,
    )
    assert [(r["compiled"], r["status"]) for r in rows] == [(True, "ok")], rows[0]["reason"]


# --- the command -------------------------------------------------------------------------------


def test_command_writes_csv_with_the_documented_columns_json_and_plots(tmp_path):
    argv = [
        "--preset",
        "tiny",
        "--device",
        "cpu",
        "--contenders",
        "naive,fused_sdpa,sdpa_direct",
        "--backends",
        "default",
        "--causal",
        "yes",
        "--out",
        str(tmp_path),
        "--run-name",
        "tiny",
        "--no-progress",
    ]
    assert main(argv) == 0
    with (tmp_path / "tiny.csv").open() as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames) == COLUMNS
    assert {r["contender"] for r in rows} == {"naive", "fused_sdpa", "sdpa_direct"}
    assert {r["mode"] for r in rows} == {"forward", "forward_backward"}
    assert all(r["status"] == "ok" and float(r["time_ms"]) > 0 for r in rows)
    meta = json.loads((tmp_path / "tiny.json").read_text())
    assert meta["device_type"] == "cpu" and meta["torch"] == torch.__version__
    assert meta["command"].startswith("python -m benchmarks --preset tiny")
    assert meta["rows"] == {"ok": len(rows), "oom": 0, "unavailable": 0}
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "tiny_float32_forward_backward_causal_dk8.png",
        "tiny_float32_forward_causal_dk8.png",
    ]


# Every bad flag: (argv, a fragment of the one-line error). "{out}" is the run's --out folder
# and "{file}" an existing file beside it. The base command is the tiny preset's smallest case.
BAD_FLAGS = {
    "seq_lens_zero": (["--seq-lens", "0"], "argument --seq-lens: '0' is not a positive integer"),
    "seq_lens_negative": (["--seq-lens", "16,-4"], "argument --seq-lens: '-4' is not a positive"),
    "seq_lens_not_a_number": (["--seq-lens", "abc"], "argument --seq-lens: 'abc' is not a posit"),
    "seq_lens_empty_list": (["--seq-lens", ","], "argument --seq-lens: no values in ','"),
    "min_seq_len_zero": (["--min-seq-len", "0"], "argument --min-seq-len: '0' is not a positive"),
    "max_seq_len_negative": (["--max-seq-len", "-1"], "argument --max-seq-len: '-1' is not a po"),
    "min_seq_len_above_max": (
        ["--min-seq-len", "2048", "--max-seq-len", "1024"],
        "argument --min-seq-len: 2048 is above --max-seq-len 1024",
    ),
    "no_power_of_two_between_min_and_max": (
        ["--min-seq-len", "100", "--max-seq-len", "120"],
        "argument --min-seq-len: no power of two from --min-seq-len 100 to --max-seq-len 120",
    ),
    "batch_zero": (["--batch", "0"], "argument --batch: '0' is not a positive integer"),
    "batch_negative": (["--batch", "-1"], "argument --batch: '-1' is not a positive integer"),
    "d_model_zero": (["--d-model", "0"], "argument --d-model: '0' is not a positive integer"),
    "heads_zero": (["--heads", "0"], "argument --heads: '0' is not a positive integer"),
    "heads_not_dividing_d_model": (["--heads", "3"], "argument --heads: 3 does not divide --d-mo"),
    "head_dims_zero": (["--head-dims", "0"], "argument --head-dims: '0' is not a positive"),
    "head_dims_above_d_model": (
        ["--head-dims", "64"],
        "argument --head-dims: 64 does not divide --d-model 32",
    ),
    "device_unknown": (["--device", "foo"], "argument --device: expected cpu, cuda, cuda:N or mps"),
    "device_bad_index": (["--device", "cuda:abc"], "argument --device: expected cpu, cuda, cud"),
    "device_torch_knows_but_not_here": (["--device", "meta"], "argument --device: expected cpu,"),
    "out_under_a_file": (
        ["--out", "{file}/results"],
        "argument --out: cannot create '{file}/results': '{file}' is a file",
    ),
    "out_is_a_file": (["--out", "{file}"], "argument --out: '{file}' is a file, not a folder"),
    "out_where_no_folder_can_be_made_even_as_root": (
        ["--out", "/proc/x"],
        "argument --out: cannot create '/proc/x'",
    ),
    "min_run_time_nan": (["--min-run-time", "nan"], "argument --min-run-time: expected a positi"),
    "min_run_time_infinite": (["--min-run-time", "inf"], "argument --min-run-time: expected a p"),
    "min_run_time_negative": (["--min-run-time", "-1"], "argument --min-run-time: expected a po"),
    "time_budget_zero": (["--time-budget", "0"], "argument --time-budget: expected a positive"),
    "time_budget_nan": (["--time-budget", "nan"], "argument --time-budget: expected a positive"),
    "dry_run_of_t_zero": (["--dry-run", "--seq-lens", "0"], "argument --seq-lens: '0' is not a "),
    "run_name_escaping_out": (["--run-name", "../../x"], "argument --run-name: expected a file"),
    "run_name_with_a_folder": (["--run-name", "a/b"], "argument --run-name: expected a file stem"),
    "contender_unknown": (["--contenders", "fast"], "argument --contenders: unknown contender"),
    "contenders_empty_list": (["--contenders", ","], "argument --contenders: no values in ','"),
    "dtype_unknown": (["--dtypes", "float8"], "argument --dtypes: unknown dtype 'float8'"),
    "backend_unknown": (["--backends", "fastest"], "argument --backends: unknown backend"),
    "mode_unknown": (["--modes", "sideways"], "argument --modes: unknown mode 'sideways'"),
    "contender_that_no_backend_runs": (
        ["--contenders", "torch_mha", "--backends", "math"],
        "argument --contenders: torch_mha runs only under the default backend",
    ),
    "preset_unknown": (["--preset", "huge"], "argument --preset: invalid choice: 'huge'"),
}
QUICK = ["--preset", "tiny", "--contenders", "sdpa_direct", "--backends", "default"]
QUICK += ["--modes", "forward", "--causal", "no", "--no-progress", "--no-plots"]


def _files_under(folder):
    return sorted((p.relative_to(folder).as_posix(), p.read_bytes()) for p in folder.rglob("*"))


def _no_timing(*args, **kwargs):
    pytest.fail("a measurement started: the flag was not refused")  # not caught by the sweep


def assert_refused(command, prog, argv, fragment, tmp_path, capsys, monkeypatch):
    """``command(argv)`` exits with code 2 and one line on stderr holding ``fragment``, having
    printed nothing else and written nothing. "{out}" in argv and fragment is a fresh folder
    under ``tmp_path``, "{file}" an existing file beside it. A flag that slips through fails
    at its first measurement (``--min-run-time nan`` would time for ever)."""
    monkeypatch.setattr("benchmarks.runner.median_seconds", _no_timing)
    monkeypatch.setattr("benchmarks.decoding.median_seconds", _no_timing)
    (tmp_path / "a-file").write_text("kept")
    before = _files_under(tmp_path)
    given = {"out": str(tmp_path / "out"), "file": str(tmp_path / "a-file")}
    with pytest.raises(SystemExit) as done:
        command(["--out", given["out"], *(a.format(**given) for a in argv)])
    out, err = capsys.readouterr()
    assert done.value.code == 2
    assert err.startswith(f"{prog}: error: ") and err.count("\n") == 1, err
    assert fragment.format(**given) in err
    assert out == ""  # not even the plan
    assert _files_under(tmp_path) == before


@pytest.mark.parametrize(("flags", "fragment"), BAD_FLAGS.values(), ids=BAD_FLAGS.keys())
def test_a_bad_flag_is_one_line_of_error_exit_code_2_and_nothing_written(
    tmp_path, capsys, monkeypatch, flags, fragment
):
    argv = [*QUICK, *flags]
    assert_refused(main, "python -m benchmarks", argv, fragment, tmp_path, capsys, monkeypatch)


def test_a_cuda_index_beyond_the_gpus_is_named_before_anything_runs(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    problem = runner_module.device_problem(torch.device("cuda:1"))
    assert problem == "device 'cuda:1' is not available: this machine has 1 CUDA GPU(s)"
    assert runner_module.device_problem(torch.device("cuda:0")) is None


def test_a_flag_replaces_the_presets_other_way_of_saying_it(capsys):
    # gpu-quick sets --head-dims 64,128; --heads 4 replaces them (it used to be ignored).
    assert main(["--preset", "gpu-quick", "--heads", "4", "--dry-run"]) == 0
    assert "plan: 144 measurements on cuda" in capsys.readouterr().out  # 288 with two head sizes
    # tiny sets T = 16 ... 32 as --min/--max-seq-len, so --max-seq-len 64 adds T = 64.
    assert main(["--preset", "tiny", "--device", "cpu", "--max-seq-len", "64", "--dry-run"]) == 0
    assert "plan: 108 measurements" in capsys.readouterr().out  # 36 series x 3 lengths


# --- plots and summaries on a hand-made table --------------------------------------------------


def _table(device="NVIDIA H200", peak=989.0):
    rows = []
    for contender, ms in (("naive", 4.0), ("fused_sdpa", 1.0), ("sdpa_direct", 0.8)):
        for seq_len, scale in ((1024, 1.0), (2048, 4.0)):
            rows.append(
                dict(
                    device_name=device,
                    device_type="cuda",
                    contender=contender,
                    backend="-" if contender == "naive" else "default",
                    compiled=False,
                    dtype="bfloat16",
                    causal=False,
                    mode="forward",
                    batch=1,
                    seq_len=seq_len,
                    d_model=64,
                    heads=1,
                    d_k=64,
                    status="ok",
                    time_ms=ms * scale,
                    peak_mem_mib=10.0 * scale,
                    tflops=100.0 / ms,
                    peak_tflops=peak,
                    peak_fraction=None if peak is None else 100.0 / ms / peak,
                )
            )
    rows.append({**rows[0], "seq_len": 4096, "status": "oom", "time_ms": None})
    return pd.DataFrame(rows)


def test_plot_draws_three_panels_and_the_device_peak(tmp_path):
    path = tmp_path / "r.csv"
    _table().to_csv(path, index=False)
    fig = plot_results(path, dtype="bfloat16")
    axes = fig.axes
    assert len(axes) == 3 and "NVIDIA H200" in fig._suptitle.get_text()
    labels = [line.get_label() for line in axes[2].get_lines()]
    assert any("989" in label for label in labels)
    plt.close(fig)


def test_plot_says_memory_is_not_measured_when_the_column_is_empty():
    table = _table(device="CPU (x86_64)", peak=None).assign(peak_mem_mib=None)
    fig = plot_results(table, dtype="bfloat16")
    assert "not measured" in " ".join(t.get_text() for t in fig.axes[1].texts)
    plt.close(fig)


def test_plot_names_the_selection_that_has_no_rows():
    with pytest.raises(ValueError, match="float16"):
        plot_results(_table(), dtype="float16")


def test_speedup_is_taken_at_the_largest_length_both_measured():
    result = speedup(_table(), dtype="bfloat16", mode="forward", causal=False)
    assert result == {"seq_len": 2048, "fast_ms": 4.0, "slow_ms": 16.0, "speedup": 4.0}


def test_best_peak_fraction_is_none_without_a_known_peak():
    assert best_peak_fraction(_table(peak=None)) is None
    best = best_peak_fraction(_table())
    assert best["peak_fraction"] == pytest.approx(125.0 / 989.0)


def test_runs_off_a_gpu_go_to_the_ignored_local_folder_and_gpu_runs_to_their_own():
    assert default_out("cpu", "CPU (x86_64)").parts[:3] == ("benchmarks", "results", "local")
    assert default_out("cuda", "NVIDIA H200").parts[:2] == ("benchmarks", "results")
    assert "local" not in default_out("cuda:0", "NVIDIA H200").parts


# --- the CUDA paths, faked on the CPU ----------------------------------------------------------


def test_out_of_memory_frees_the_failed_cases_tensors_and_stops_only_that_series(monkeypatch):
    import weakref

    held: list[weakref.ref] = []
    alive_at_free: list[bool] = []
    real = runner_module.make_step

    def big_case_runs_out(case, device):
        if case.contender != "naive" or case.seq_len < 16:
            return real(case, device)
        workspace = torch.ones(1000)  # what a real CUDA case holds when it runs out
        held.append(weakref.ref(workspace))

        def step():
            workspace.add_(1)
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")

        return step

    def record_free(device):
        alive_at_free.append(any(ref() is not None for ref in held))

    monkeypatch.setattr(runner_module, "make_step", big_case_runs_out)
    monkeypatch.setattr(runner_module, "free_memory", record_free)
    config = BenchConfig(contenders=("naive", "fused_sdpa"), **{**TINY, "seq_lens": (8, 16, 32)})
    rows = run(config, progress=False)
    seen = [(r["contender"], r["seq_len"], r["status"]) for r in rows]
    assert ("naive", 16, "oom") in seen and ("naive", 32, "ok") not in seen
    assert [s for s in seen if s[0] == "fused_sdpa"] == [
        ("fused_sdpa", t, "ok") for t in (8, 16, 32)
    ]
    assert alive_at_free == [False]  # freed once, after the case's tensors were gone


def test_an_unavailable_backend_row_carries_the_error_and_the_warnings_that_explain_it(
    monkeypatch,
):
    import warnings

    real = runner_module.make_step

    def flash_refuses(case, device):
        if case.backend != "flash":
            return real(case, device)

        def step():
            warnings.warn("Flash attention requires q, k, v of the same dtype", stacklevel=1)
            raise RuntimeError("No available kernel. Aborting execution.\nmore detail")

        return step

    monkeypatch.setattr(runner_module, "make_step", flash_refuses)
    config = BenchConfig(contenders=("sdpa_direct",), backends=("flash", "math"), **TINY)
    rows = run(config, progress=False)
    flash = [r for r in rows if r["backend"] == "flash"]
    assert [r["status"] for r in flash] == ["unavailable"]
    assert flash[0]["reason"] == (
        "RuntimeError: No available kernel. Aborting execution.; "
        "Flash attention requires q, k, v of the same dtype"
    )
    assert [r["status"] for r in rows if r["backend"] == "math"] == ["ok", "ok"]


def test_contenders_compared_with_each_other_are_timed_side_by_side_at_each_length():
    config = BenchConfig(
        contenders=("fused_sdpa", "sdpa_functional"),
        backends=("default", "math"),
        **{**TINY, "seq_lens": (8, 16)},
    )
    order = [(r["backend"], r["seq_len"], r["contender"]) for r in run(config, progress=False)]
    assert order == [
        (backend, t, c)
        for backend in ("default", "math")
        for t in (8, 16)
        for c in ("fused_sdpa", "sdpa_functional")
    ]


def test_sdpa_contenders_never_build_a_t_by_t_mask(monkeypatch):
    from benchmarks import contenders

    def no_mask(T):
        raise AssertionError(f"a ({T}, {T}) mask was built")

    monkeypatch.setattr(contenders, "causal_mask", no_mask)
    for name in ("fused_sdpa", "sdpa_functional", "sdpa_direct"):
        case = Case(name, "default", False, "float32", True, "forward", 1, 8, 16, 2)
        assert make_step(case, CPU)().shape[-2] == 8
    with pytest.raises(AssertionError, match="mask was built"):
        make_step(Case("naive", "-", False, "float32", True, "forward", 1, 8, 16, 2), CPU)


def test_command_runs_without_ipywidgets_or_jupyter(tmp_path):
    """The GPU machine has torch, numpy, pandas, matplotlib, seaborn and tqdm, nothing more."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import sys
        for name in ("ipywidgets", "nbformat", "nbclient", "IPython", "ipykernel", "jupyter_client"):
            sys.modules[name] = None  # import name -> ImportError
        from benchmarks.__main__ import main
        try:
            main(["--help"])
        except SystemExit as done:
            assert done.code == 0, done.code
        assert main(["--preset", "tiny", "--device", "cpu", "--contenders", "fused_sdpa",
                     "--seq-lens", "8", "--out", {str(tmp_path)!r}, "--no-progress"]) == 0
        assert main(["--check-goals", {str(tmp_path)!r}]) == 0
        from benchmarks.decode import main as decode_main
        assert decode_main(["--preset", "tiny", "--device", "cpu", "--max-seq-len", "64",
                            "--kv-heads", "8", "--out", {str(tmp_path / "decode")!r},
                            "--no-progress"]) == 0
        tops = {{m.split(".")[0] for m, module in sys.modules.items() if module is not None}}
        where = {{m: getattr(sys.modules[m], "__file__", None) for m in tops}}
        print("imported:", json.dumps({{m: f for m, f in where.items() if f}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,  # the command runs from the repository root, where benchmarks/ is
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage: python -m benchmarks" in done.stdout and "NOT MEASURED" in done.stdout
    imported = json.loads(done.stdout.split("imported:")[1])
    assert "torch" in imported and not imported.keys() & {"ipywidgets", "nbformat", "IPython"}
    allowed = _installed_with("torch", "numpy", "pandas", "matplotlib", "seaborn", "tqdm")
    # torch imports Triton by itself whenever it is installed (a CUDA torch requires it; here
    # requirements.txt adds it beside a CPU torch for notebook 09): not the command's doing.
    allowed |= {"triton"}
    assert _distributions(imported.values()) <= allowed


def _distributions(files) -> set[str]:
    """The installed distributions (normalised names) that the module ``files`` belong to."""
    import importlib.metadata as md
    import sys
    from pathlib import Path

    providers = md.packages_distributions()
    roots = [Path(p).resolve() for p in sys.path if p.endswith("-packages")]
    names = set()
    for file in map(Path, files):
        for root in roots:
            if file.resolve().is_relative_to(root):
                top = file.resolve().relative_to(root).parts[0].split(".")[0]
                if top.startswith("__editable__"):  # this course's own `pip install -e .`
                    continue
                names |= {_norm(d) for d in providers.get(top, [top])}
    return names


def _installed_with(*roots: str) -> set[str]:
    """``roots`` and every distribution they require, recursively (extras left out)."""
    import importlib.metadata as md
    import re

    seen, todo = set(), [_norm(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for req in requires:
            if "extra ==" not in req:
                todo.append(_norm(re.match(r"[A-Za-z0-9._-]+", req).group()))
    return seen


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_cpu_note_prints_the_closing_note_ratios_of_fused_sdpa(capsys):
    rows = [
        dict(contender="fused_sdpa", status="ok", time_ms=300.0),
        dict(contender="torch_mha", status="ok", time_ms=1200.0),
        dict(contender="naive", status="ok", time_ms=1500.0),
    ]
    print_note(rows)
    text = capsys.readouterr().out
    assert "fused_sdpa time / torch_mha time = 0.25" in text
    assert "naive time / fused_sdpa time     = 5.00 (speed-up)" in text
    print_note(rows[:1])  # a contender missing: said, no ratio invented
    text = capsys.readouterr().out
    assert "torch_mha: not measured" in text and "time /" not in text
