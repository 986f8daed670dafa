#!/usr/bin/env python3
"""perfsim's CUDA attention kernels against PyTorch SDPA (flash and cuDNN backends).

Runs bench_flash (bench/cuda/bench_flash.cu, which times our kernels with CUDA events) and
times torch.nn.functional.scaled_dot_product_attention at the same shapes in the same
process run, on the same GPU, then prints one table. Q, K, V use our layout
[b, seq, heads, d] (handed to SDPA as a transposed view, the layout its flash kernel reads
natively). FLOPs count the full seq_q × seq_kv rectangle for both sides (the project's
convention), so ratios are unaffected by the causal halving other tools apply.

    python3 bench/cuda/bench_attention.py --exe build/bench/cuda/bench_flash [--quick]
"""
import argparse
import statistics
import subprocess

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def ours(exe, mode, dtype, b, sq, skv, h, hkv, d, causal, block_m=0, iters=30):
    cmd = [exe, mode, dtype, str(b), str(sq), str(skv), str(h), str(hkv), str(d),
           str(int(causal)), str(block_m), str(iters)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            fields = dict(kv.split("=") for kv in line.split()[1:])
            return float(fields["ms"])
    raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr.strip()}")


def median_ms(fn, iters=30):
    for _ in range(3):
        fn()
    times = []
    for _ in range(iters):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    return statistics.median(times)


def sdpa_ms(backend, mode, dtype, b, sq, skv, h, d, causal):
    """Median ms of SDPA forward (or backward only) with one backend; None if unsupported."""
    t = DTYPES[dtype]
    q = torch.randn(b, sq, h, d, device="cuda", dtype=t).transpose(1, 2)
    k = torch.randn(b, skv, h, d, device="cuda", dtype=t).transpose(1, 2)
    v = torch.randn(b, skv, h, d, device="cuda", dtype=t).transpose(1, 2)
    try:
        with sdpa_kernel(backend):
            if mode == "fwd":
                return median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            grad = torch.randn_like(out)
            return median_ms(lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True),
                             iters=10)
    except RuntimeError as e:  # backend refuses the shape or is absent
        print(f"  SDPA {backend} unavailable: {str(e).splitlines()[0][:100]}")
        return None


def tflops(mode, b, sq, skv, h, d, ms):
    flops = 4.0 * b * h * sq * skv * d * (2.5 if mode == "bwd" else 1.0)
    return flops / (ms * 1e-3) / 1e12 if ms else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--quick", action="store_true", help="one forward shape only")
    args = ap.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")

    fwd_shapes = [(8, 2048, 16, 128), (4, 4096, 16, 128), (2, 8192, 16, 128), (4, 4096, 32, 64)]
    if args.quick:
        fwd_shapes = fwd_shapes[1:2]
    rows = []
    for (b, s, h, d) in fwd_shapes:
        for causal in (False, True):
            mine = {bm: ours(args.exe, "fwd", "bf16", b, s, s, h, h, d, causal, bm)
                    for bm in (64, 128)}
            best_bm = min(mine, key=mine.get)
            fl = sdpa_ms(SDPBackend.FLASH_ATTENTION, "fwd", "bf16", b, s, s, h, d, causal)
            cu = sdpa_ms(SDPBackend.CUDNN_ATTENTION, "fwd", "bf16", b, s, s, h, d, causal)
            rows.append(("fwd", b, s, h, d, causal, best_bm, mine[64], mine[128], mine[best_bm], fl, cu))
    if not args.quick:
        b, s, h, d = 2, 2048, 16, 128
        mine = ours(args.exe, "bwd", "bf16", b, s, s, h, h, d, False, 0, 10)
        fl = sdpa_ms(SDPBackend.FLASH_ATTENTION, "bwd", "bf16", b, s, s, h, d, False)
        cu = sdpa_ms(SDPBackend.CUDNN_ATTENTION, "bwd", "bf16", b, s, s, h, d, False)
        rows.append(("bwd", b, s, h, d, False, 0, mine, mine, mine, fl, cu))

    print("\nTFLOP/s (full-rectangle FLOPs), bf16; ours_bm64/ours_bm128 = query tile height")
    print(f"{'mode':4} {'b':>2} {'seq':>5} {'H':>3} {'d':>4} {'causal':>6} | {'bm64':>7} {'bm128':>7} "
          f"| {'ours':>7} {'flash':>7} {'cudnn':>7} | {'ours/flash':>10} {'ours/cudnn':>10}")
    for (mode, b, s, h, d, causal, bm, m64, m128, mine, fl, cu) in rows:
        t = lambda ms: tflops(mode, b, s, s, h, d, ms)
        r_fl = fl / mine if fl else float("nan")
        r_cu = cu / mine if cu else float("nan")
        print(f"{mode:4} {b:>2} {s:>5} {h:>3} {d:>4} {int(causal):>6} | {t(m64):7.1f} {t(m128):7.1f} "
              f"| {t(mine):7.1f} {t(fl):7.1f} {t(cu):7.1f} | {r_fl:10.3f} {r_cu:10.3f}")

    if not args.quick:
        print("\ndecode (seq_q 1, bf16): GB/s of K/V read")
        for (b, skv, h, hkv, d) in [(8, 8192, 32, 8, 128), (1, 32768, 32, 8, 128), (32, 2048, 32, 8, 128)]:
            ms = ours(args.exe, "decode", "bf16", b, 1, skv, h, hkv, d, False)
            gb = 2.0 * b * skv * hkv * d * 2 / (ms * 1e-3) / 1e9
            print(f"  b={b:>2} skv={skv:>6} H={h} Hkv={hkv} d={d}: {ms * 1e3:8.1f} us  {gb:7.0f} GB/s")


if __name__ == "__main__":
    main()
