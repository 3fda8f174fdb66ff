"""The headline figures of a session, read back from its parts' files and printed last.

What issue 33's note asks for, so that the end of the command's output (all a lease's reply
shows) holds them: the versions and the torch pin, the best SDPA rate and its share of the
dense bf16 peak, the module against the bare functional layer, the Triton kernel against the
fastest SDPA backend, decode tokens/s with and without the cache, and each notebook's state.
"""

from __future__ import annotations

import json
from pathlib import Path


def _results(out: Path, part: str) -> dict:
    files = sorted(out.glob(f"[0-9][0-9]_{part}.json"))
    try:
        return json.loads(files[0].read_text()).get("results") or {} if files else {}
    except ValueError:
        return {}


def _g(x, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


def lines(out: Path) -> list[str]:
    """The figures, one line each; a part that recorded nothing gives no line."""
    text = []
    env = _results(out, "env")
    if env:
        e = env.get("environment") or {}
        text.append(f"device {e.get('device_name')}, driver {e.get('driver')}, torch "
                    f"{e.get('torch')}, CUDA {e.get('cuda')}, cuDNN {e.get('cudnn')}, triton "
                    f"{(env.get('versions') or {}).get('triton')}; "
                    f"{(env.get('torch_pin') or {}).get('note')}")  # fmt: skip
    head = _results(out, "headline")
    best = head.get("best_sdpa")
    if best:
        share = best.get("peak_fraction")
        text.append(f"best SDPA: {_g(best['tflops'])} TFLOP/s ({best['backend']}, d_k "
                    f"{best['d_k']}, T {best['seq_len']}, causal {best['causal']}), "
                    f"{'no known peak' if share is None else f'{share:.0%} of the dense bf16 peak'}")  # fmt: skip
    ratios = [r["ratio"] for r in head.get("module_vs_functional", []) if r["seq_len"] >= 4096]
    if ratios:
        text.append(f"fused_sdpa / sdpa_functional at T >= 4096: {min(ratios):.3f} to "
                    f"{max(ratios):.3f}")  # fmt: skip
    for g in head.get("goals", []):
        text.append(f"goal {g['name']}: {g['verdict']}")
    for r in _results(out, "triton").get("kernel_table", []):
        text.append(f"triton {r['dtype']} causal={r['causal']} d_k={r['d_k']} T={r['seq_len']}: "
                    f"{_g(r['triton_ms'])} ms vs {r['sdpa_backend']} {_g(r['sdpa_ms'])} ms "
                    f"(ratio {_g(r['ratio'])})")  # fmt: skip
    for r in _results(out, "decode").get("table", []):
        text.append(f"decode h_kv={r['kv_heads']} T={r['seq_len']}: {_g(r['cached'])} tokens/s "
                    f"cached, {_g(r['recomputed'])} recomputed (x{_g(r['speedup'])})")  # fmt: skip
    for nb in _results(out, "notebooks").get("notebooks", []):
        text.append(f"notebook {nb['name']}: {nb['state']} in {nb['seconds']} s, "
                    f"{len(nb['errors'])} cell(s) raised")  # fmt: skip
    return text
