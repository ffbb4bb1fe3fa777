"""Cost of NaN probes in a CUDA-graph-replayed Llama-8B-shaped decode step (needs a GPU).

Variants, measured side by side in one process, interleaved round by round:

- ``none``: no probes (the detection variable off while capturing);
- ``prtoggle``: ``maybe_detect_nan`` on every layer's attention output and hidden state;
- ``instrument``: ``detect.instrument(model)``, every module's output probed (11 modules per
  layer and the model's norm, head and root: 355 outputs per step), fused: one launch per
  layer and one for the rest;
- ``instrument-unfused``: the same with ``fuse=False``, one launch per module output;
- ``assert_async``: sglang's style, ``torch._assert_async(~torch.isnan(t).any())``;
- ``item``: a host-synchronising ``bool(torch.isnan(t).any().item())`` per probe. It
  cannot live inside a CUDA graph, so this variant and an eager ``none-eager`` baseline
  run without graphs.

Shapes: 32 layers, hidden 4096, 32 query / 8 KV heads, head dim 128, MLP 14336, vocab
128256, random bf16 weights, 4k context for every request, attention through our
TRT-LLM-contract decode kernel (Triton). Rotary embedding is left out: it does not
change what the probes cost. Usage: ``python bench/detect_overhead.py [--batch 1 64]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from fixes.kernels.trtllm_fmha import trtllm_batch_decode_with_kv_cache
from prtoggle import detect
from prtoggle.detect.probes import witness

NAN_ENV = "SGLANG_SPEC_NAN_DETECTION"


@dataclass(frozen=True)
class Shape:
    layers: int = 32
    hidden: int = 4096
    q_heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    mlp: int = 14336
    vocab: int = 128256
    context: int = 4096
    page_size: int = 16


class LlamaDecodeStep:
    """Weights, KV cache and static buffers for one decode step of a Llama-shaped model."""

    def __init__(self, shape: Shape, *, max_batch: int, device: torch.device) -> None:
        self.s = shape
        self.batch = max_batch
        self.device = device
        gen = torch.Generator(device=device).manual_seed(0)
        bf16 = torch.bfloat16

        def weight(rows: int, cols: int) -> torch.Tensor:
            w = torch.randn(rows, cols, device=device, dtype=bf16, generator=gen)
            return w.mul_(cols**-0.5)

        qkv_out = (shape.q_heads + 2 * shape.kv_heads) * shape.head_dim
        self.qkv = [weight(shape.hidden, qkv_out) for _ in range(shape.layers)]
        self.o = [weight(shape.q_heads * shape.head_dim, shape.hidden) for _ in range(shape.layers)]
        self.gate_up = [weight(shape.hidden, 2 * shape.mlp) for _ in range(shape.layers)]
        self.down = [weight(shape.mlp, shape.hidden) for _ in range(shape.layers)]
        self.lm_head = weight(shape.hidden, shape.vocab)
        pages_per_req = -(-(shape.context + 1) // shape.page_size)
        num_pages = max_batch * pages_per_req
        kv_shape = (num_pages, shape.page_size, shape.kv_heads, shape.head_dim)
        self.k_cache = [
            torch.randn(kv_shape, device=device, dtype=bf16, generator=gen) * 0.5
            for _ in range(shape.layers)
        ]
        self.v_cache = [torch.randn_like(k) for k in self.k_cache]
        perm = torch.randperm(num_pages, device=device, generator=gen).to(torch.int32)
        self.block_tables = perm.view(max_batch, pages_per_req)
        self.input_hidden = torch.randn(max_batch, shape.hidden, device=device, dtype=bf16)
        self.seq_lens = torch.full(
            (max_batch,), shape.context + 1, dtype=torch.int32, device=device
        )
        self.slots = (
            self.block_tables[:, shape.context // shape.page_size].long() * shape.page_size
            + shape.context % shape.page_size
        )

    def forward(self, batch: int, probe: Callable[[torch.Tensor, str], None]) -> torch.Tensor:
        s = self.s
        h = self.input_hidden[:batch]
        q_width, kv_width = s.q_heads * s.head_dim, s.kv_heads * s.head_dim
        for layer in range(s.layers):
            x = _rms_norm(h)
            q, k, v = (x @ self.qkv[layer]).split([q_width, kv_width, kv_width], dim=-1)
            flat = (-1, s.kv_heads, s.head_dim)
            self.k_cache[layer].view(flat)[self.slots[:batch]] = k.reshape(flat)
            self.v_cache[layer].view(flat)[self.slots[:batch]] = v.reshape(flat)
            attn = trtllm_batch_decode_with_kv_cache(
                query=q.reshape(batch, s.q_heads, s.head_dim),
                k_cache=self.k_cache[layer],
                v_cache=self.v_cache[layer],
                block_tables=self.block_tables[:batch],
                seq_lens=self.seq_lens[:batch],
                max_seq_len=s.context + 1,
                softmax_scale=s.head_dim**-0.5,
                provider="triton",
            )
            probe(attn, f"layer{layer}.attn_output")
            h = h + attn.reshape(batch, q_width) @ self.o[layer]
            gate, up = (_rms_norm(h) @ self.gate_up[layer]).chunk(2, dim=-1)
            h = h + (torch.nn.functional.silu(gate) * up) @ self.down[layer]
            probe(h, f"layer{layer}.hidden_states")
        return _rms_norm(h) @ self.lm_head


class Projection(torch.nn.Module):
    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


class RmsNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _rms_norm(x)


class SiluAndMul(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return torch.nn.functional.silu(gate) * up


class PagedAttention(torch.nn.Module):
    def __init__(self, step: LlamaDecodeStep, layer: int) -> None:
        super().__init__()
        self.step, self.layer = step, layer

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        step, s, batch = self.step, self.step.s, q.shape[0]
        flat = (-1, s.kv_heads, s.head_dim)
        step.k_cache[self.layer].view(flat)[step.slots[:batch]] = k.reshape(flat)
        step.v_cache[self.layer].view(flat)[step.slots[:batch]] = v.reshape(flat)
        out = trtllm_batch_decode_with_kv_cache(
            query=q.reshape(batch, s.q_heads, s.head_dim),
            k_cache=step.k_cache[self.layer],
            v_cache=step.v_cache[self.layer],
            block_tables=step.block_tables[:batch],
            seq_lens=step.seq_lens[:batch],
            max_seq_len=s.context + 1,
            softmax_scale=s.head_dim**-0.5,
            provider="triton",
        )
        return out.reshape(batch, s.q_heads * s.head_dim)


class SelfAttention(torch.nn.Module):
    def __init__(self, step: LlamaDecodeStep, layer: int) -> None:
        super().__init__()
        s = step.s
        self.widths = [s.q_heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim]
        self.qkv_proj = Projection(step.qkv[layer])
        self.attn = PagedAttention(step, layer)
        self.o_proj = Projection(step.o[layer])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv_proj(x).split(self.widths, dim=-1)
        return self.o_proj(self.attn(q, k, v))


class Mlp(torch.nn.Module):
    def __init__(self, step: LlamaDecodeStep, layer: int) -> None:
        super().__init__()
        self.gate_up_proj = Projection(step.gate_up[layer])
        self.act_fn = SiluAndMul()
        self.down_proj = Projection(step.down[layer])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_up_proj(x)))


class DecoderLayer(torch.nn.Module):
    def __init__(self, step: LlamaDecodeStep, layer: int) -> None:
        super().__init__()
        self.input_layernorm = RmsNorm()
        self.self_attn = SelfAttention(step, layer)
        self.post_attention_layernorm = RmsNorm()
        self.mlp = Mlp(step, layer)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.self_attn(self.input_layernorm(h))
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(torch.nn.Module):
    """The same decode step as nn.Modules (sglang's module names), for detect.instrument()."""

    def __init__(self, step: LlamaDecodeStep) -> None:
        super().__init__()
        self.step = step
        self.layers = torch.nn.ModuleList(DecoderLayer(step, i) for i in range(step.s.layers))
        self.norm = RmsNorm()
        self.lm_head = Projection(step.lm_head)

    def forward(self, batch: int) -> torch.Tensor:
        h = self.step.input_hidden[:batch]
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(self.norm(h))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iters", type=int, default=10, help="replays per round")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/detect_overhead.py needs a CUDA GPU")
    device = torch.device("cuda")
    model = LlamaDecodeStep(Shape(layers=args.layers), max_batch=max(args.batch), device=device)
    results = []
    for batch in args.batch:
        results.append(_measure_batch(model, batch, rounds=args.rounds, iters=args.iters))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    for row in results:
        base = row["ms"]["none"]
        eager_base = row["ms"]["none-eager"]
        print(
            f"batch {row['batch']}: none {base:.3f} ms/step (graph), "
            f"{eager_base:.3f} ms/step (eager), "
            f"{row['instrumented_outputs']} instrumented outputs"
        )
        for name, ms in row["ms"].items():
            ref = eager_base if name.endswith("eager") or name == "item" else base
            if name.startswith("instrument"):
                ref = row["ms"]["none-module"]
            print(f"  {name:18s} {ms:8.3f} ms  x{ms / ref:.4f}")


def _measure_batch(model: LlamaDecodeStep, batch: int, *, rounds: int, iters: int) -> dict:
    def prtoggle_probe(t: torch.Tensor, site: str) -> None:
        detect.maybe_detect_nan(t, site)

    def assert_async_probe(t: torch.Tensor, site: str) -> None:
        torch._assert_async(~torch.isnan(t).any())

    def item_probe(t: torch.Tensor, site: str) -> None:
        if bool(torch.isnan(t).any().item()):
            raise RuntimeError(f"NaN at {site}")

    def no_probe(t: torch.Tensor, site: str) -> None:
        return None

    modules = LlamaModel(model)

    def instrumented(*, fuse: bool) -> Callable[[], None]:
        with detect.instrument(modules, name="model", fuse=fuse):
            return _graph(lambda: modules(batch), nan_env=True)

    runs: dict[str, Callable[[], None]] = {
        "none": _graph(lambda: model.forward(batch, no_probe), nan_env=False),
        "none-module": _graph(lambda: modules(batch), nan_env=False),
        "prtoggle": _graph(lambda: model.forward(batch, prtoggle_probe), nan_env=True),
        "instrument": instrumented(fuse=True),
        "instrument-unfused": instrumented(fuse=False),
        "assert_async": _graph(lambda: model.forward(batch, assert_async_probe), nan_env=False),
        "none-eager": _eager(lambda: model.forward(batch, no_probe)),
        "item": _eager(lambda: model.forward(batch, item_probe)),
    }
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for run in runs.values():  # warm-up, JIT, autotune
        for _ in range(3):
            run()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for name, run in runs.items():
            samples[name].append(_time_ms(run, iters))
    detect.check()  # random weights make no NaN: a report here would be a false positive
    sites = {site for _, site in witness.witness_tables().slots}
    return {
        "batch": batch,
        "ms": {k: statistics.median(v) for k, v in samples.items()},
        "instrumented_outputs": sum(site.startswith("model") for site in sites),
    }


def _graph(forward: Callable[[], torch.Tensor], *, nan_env: bool) -> Callable[[], None]:
    with _env(NAN_ENV, "1" if nan_env else None):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            forward()
            forward()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            forward()
    torch.cuda.synchronize()
    return graph.replay


def _eager(forward: Callable[[], torch.Tensor]) -> Callable[[], None]:
    def run() -> None:
        forward()

    return run


def _time_ms(run: Callable[[], None], iters: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


@contextlib.contextmanager
def _env(name: str, value: str | None) -> Iterator[None]:
    old = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _rms_norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


if __name__ == "__main__":
    main()
