"""Speed of the TRT-LLM-contract attention kernels: Triton vs flashinfer vs a copy (needs a GPU).

Decode (q_len_per_req 1): our Triton split-KV kernel against flashinfer's paged decode
wrapper, both as CUDA-graph replays (eager if capture fails), and the KV bytes each reads
per second against a device-to-device copy of the same bytes. Context (full causal
prefill, q_len = kv_len): our Triton kernel against flashinfer's FA2 paged prefill, in
TFLOP/s. flashinfer is planned once per shape, outside the timed region.

Shapes: bf16, 32 query / 8 KV heads, head dim 128, page size 16 (pages shuffled).
Targets: decode >= 0.9x flashinfer and >= 75% of copy bandwidth at large batch/context;
context >= 0.8x FA2. Usage:
``python bench/kernels_trtllm.py [--mode decode context] [--batch 1 16 256] [--ctx 1024 32768]
[--sweep]`` (``--sweep`` also times a few Triton tile configurations and prints the best).
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch

from fixes.kernels.flashinfer_mha import paged_layout
from fixes.kernels.trtllm_fmha_contract import PagedAttentionArgs
from fixes.kernels.trtllm_fmha_triton import TritonBlockConfig, triton_context, triton_decode

HEADS, KV_HEADS, HEAD_DIM, PAGE = 32, 8, 128, 16
COPY_CAP_BYTES = 4 << 30
DECODE_SWEEP = [
    TritonBlockConfig(decode_block_n=n, decode_num_warps=w, decode_num_stages=s)
    for n in (32, 64, 128)
    for w in (4, 8)
    for s in (2, 3, 4)
]
SMEM_PER_BLOCK = 227 * 1024  # sm_90 opt-in limit per program
CONTEXT_SWEEP = [  # tiles whose Q tile + K/V stages fit shared memory (bf16, D 128)
    TritonBlockConfig(
        context_block_m=m,
        context_block_n=n,
        context_num_warps=w,
        context_num_stages=s,
        context_heads_fastest=order,
    )
    for m in (64, 128)
    for n in (64, 128)
    for w in (4, 8)
    for s in (2, 3, 4)
    for order in (True, False)
    if (m + 2 * s * n) * HEAD_DIM * 2 <= SMEM_PER_BLOCK - 8 * 1024
    and (m, w) != (128, 4)  # a 128x128 fp32 accumulator on 4 warps spills
]


@dataclass
class Batch:
    query: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    block_tables: torch.Tensor
    seq_lens: torch.Tensor
    cum_q: torch.Tensor
    q_len: int
    kv_len: int


def make(batch: int, kv_len: int, q_len: int) -> Batch:
    pages_per_req = math.ceil(kv_len / PAGE)
    num_pages = batch * pages_per_req
    cache = (num_pages, PAGE, KV_HEADS, HEAD_DIM)
    dev, bf16 = "cuda", torch.bfloat16
    table = torch.randperm(num_pages, device=dev).int().reshape(batch, pages_per_req)
    return Batch(
        query=torch.randn(batch * q_len, HEADS, HEAD_DIM, device=dev, dtype=bf16),
        k_cache=torch.randn(cache, device=dev, dtype=bf16),
        v_cache=torch.randn(cache, device=dev, dtype=bf16),
        block_tables=table,
        seq_lens=torch.full((batch,), kv_len, dtype=torch.int32, device=dev),
        cum_q=torch.arange(batch + 1, dtype=torch.int32, device=dev) * q_len,
        q_len=q_len,
        kv_len=kv_len,
    )


def time_ms(fn: Callable[[], object], *, iters: int = 20) -> tuple[float, str]:
    """Median milliseconds per call as a CUDA-graph replay (eager when capture fails)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    mode, run = "graph", fn
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        run = graph.replay
    except Exception:  # e.g. a wrapper that syncs: time it eagerly instead
        mode, run = "eager", fn
        torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), mode


def triton_decode_fn(
    b: Batch, out: torch.Tensor, config: TritonBlockConfig | None = None
) -> Callable[[], object]:
    args = paged_args(b, out).for_decode(q_len_per_req=1, max_seq_len=b.kv_len)
    return lambda: triton_decode(args, config=config)


def triton_context_fn(
    b: Batch, out: torch.Tensor, config: TritonBlockConfig | None = None
) -> Callable[[], object]:
    args = paged_args(b, out).for_context(
        batch_size=b.seq_lens.shape[0],
        cum_seq_lens_q=b.cum_q,
        max_q_len=b.q_len,
        max_kv_len=b.kv_len,
    )
    return lambda: triton_context(args, config=config)


def paged_args(b: Batch, out: torch.Tensor) -> PagedAttentionArgs:
    return PagedAttentionArgs(
        query=b.query,
        k_cache=b.k_cache,
        v_cache=b.v_cache,
        block_tables=b.block_tables,
        seq_lens=b.seq_lens,
        softmax_scale=HEAD_DIM**-0.5,
        out=out,
    )


def flashinfer_fn(b: Batch, out: torch.Tensor, *, decode: bool) -> Callable[[], object]:
    import flashinfer

    workspace = torch.zeros(256 << 20, dtype=torch.uint8, device="cuda")
    layout = paged_layout(block_tables=b.block_tables, kv_lens=b.seq_lens, page_size=PAGE)
    common = dict(q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16, sm_scale=HEAD_DIM**-0.5)
    pages = (layout.kv_indptr, layout.kv_indices, layout.kv_last_page_len)
    heads_and_sizes = (HEADS, KV_HEADS, HEAD_DIM, PAGE)
    if decode:
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            workspace, "NHD", use_tensor_cores=True
        )
        wrapper.plan(*pages, *heads_and_sizes, **common)
    else:
        wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD", backend="fa2")
        wrapper.plan(b.cum_q, *pages, *heads_and_sizes, causal=True, **common)
    return lambda: wrapper.run(b.query, (b.k_cache, b.v_cache), out=out)


def sweep_configs(
    make_fn: Callable[[TritonBlockConfig], Callable[[], object]], sweep: list[TritonBlockConfig]
) -> None:
    """Times every config of `sweep`; prints the fastest and the runners-up."""
    timed: list[tuple[float, TritonBlockConfig]] = []
    for config in sweep:
        try:
            ms, _ = time_ms(make_fn(config), iters=10)
        except Exception as error:  # a tile that does not fit: skip it, say so
            print(f"    skip {config}: {type(error).__name__}")
            continue
        timed.append((ms, config))
    timed.sort(key=lambda item: item[0])
    for ms, config in timed[1:4]:
        print(f"    runner-up  {ms:.3f} ms: {config}")
    best_ms, best = timed[0] if timed else (math.inf, None)
    print(f"    best sweep {best_ms:.3f} ms: {best}")


def bench_decode(batches: list[int], contexts: list[int], max_tokens: int, sweep: bool) -> None:
    print(
        "decode  batch    ctx | triton ms  flashinfer ms  ratio(fi/tri) | triton GB/s  "
        "copy GB/s  of-copy | mode"
    )
    for batch in batches:
        for ctx in contexts:
            if batch * ctx > max_tokens:
                continue
            b = make(batch, ctx, 1)
            out_t, out_f = torch.empty_like(b.query), torch.empty_like(b.query)
            tri_ms, mode = time_ms(triton_decode_fn(b, out_t))
            fi_ms, _ = time_ms(flashinfer_fn(b, out_f, decode=True))
            error = (out_t.float() - out_f.float()).abs().max().item()
            kv_bytes = 2 * batch * ctx * KV_HEADS * HEAD_DIM * 2
            copy_bytes = min(kv_bytes, COPY_CAP_BYTES)  # the rate does not grow past this
            src = torch.empty(copy_bytes // 2, dtype=torch.bfloat16, device="cuda")
            dst = torch.empty_like(src)
            copy_ms, _ = time_ms(functools.partial(dst.copy_, src))
            tri_bw, copy_bw = kv_bytes / tri_ms / 1e6, 2 * copy_bytes / copy_ms / 1e6
            print(
                f"        {batch:5d} {ctx:6d} | {tri_ms:9.3f}  {fi_ms:13.3f}  "
                f"{fi_ms / tri_ms:13.2f} | {tri_bw:11.0f}  {copy_bw:9.0f}  "
                f"{tri_bw / copy_bw:7.0%} | {mode} max|tri-fi|={error:.2e}"
            )
            if sweep:
                sweep_configs(functools.partial(triton_decode_fn, b, out_t), DECODE_SWEEP)
            del b, src, dst
            torch.cuda.empty_cache()


def bench_context(batches: list[int], contexts: list[int], max_tokens: int, sweep: bool) -> None:
    print("context batch    ctx | triton ms  fa2 ms  ratio(fa2/tri) | triton TFLOP/s  fa2 TFLOP/s")
    for batch in batches:
        for ctx in contexts:
            if batch * ctx > max_tokens // 8 or ctx > 16384:
                continue
            b = make(batch, ctx, ctx)
            out_t, out_f = torch.empty_like(b.query), torch.empty_like(b.query)
            tri_ms, _ = time_ms(triton_context_fn(b, out_t), iters=10)
            fa2_ms, _ = time_ms(flashinfer_fn(b, out_f, decode=False), iters=10)
            error = (out_t.float() - out_f.float()).abs().max().item()
            flops = 4 * batch * HEADS * HEAD_DIM * ctx * (ctx + 1) / 2  # causal half
            print(
                f"        {batch:5d} {ctx:6d} | {tri_ms:9.3f}  {fa2_ms:6.3f}  "
                f"{fa2_ms / tri_ms:14.2f} | {flops / tri_ms / 1e9:14.1f}  "
                f"{flops / fa2_ms / 1e9:11.1f} max|tri-fa2|={error:.2e}"
            )
            if sweep:
                sweep_configs(functools.partial(triton_context_fn, b, out_t), CONTEXT_SWEEP)
            del b
            torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mode", nargs="+", default=["decode", "context"], choices=["decode", "context"]
    )
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 4, 16, 64, 256])
    parser.add_argument("--ctx", nargs="+", type=int, default=[1024, 4096, 16384, 32768])
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=1 << 22,
        help="skip shapes whose batch*ctx KV tokens exceed this",
    )
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}")
    if "decode" in args.mode:
        bench_decode(args.batch, args.ctx, args.max_tokens, args.sweep)
    if "context" in args.mode:
        bench_context(args.batch, args.ctx, args.max_tokens, args.sweep)


if __name__ == "__main__":
    main()
