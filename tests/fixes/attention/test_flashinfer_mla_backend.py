"""FlashInferMLAMultiStepDraftBackend: eager vs naive attention, graph replay vs eager, #27460."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import torch

import prtoggle
from fixes.attention.flashinfer_mla_backend import FlashInferMLAMultiStepDraftBackend
from fixes.cuda_graph.graph import capture
from fixes.forward_batch import DraftDecodeInput, ForwardBatch, ForwardMode
from fixes.kernels.mla_attention import MLAShape, mla_paged_decode_torch
from fixes.memory_pool import MLATokenToKVPool, PagedTokenAllocator, ReqToTokenPool
from prtoggle import detect
from prtoggle.errors import OOBDetected

NUM_STEPS = 4
MAX_CONTEXT_LEN = 16
SHAPE = MLAShape(num_heads=2, kv_lora_rank=16, qk_rope_head_dim=8, sm_scale=0.2)


@pytest.fixture(autouse=True)
def clean_detection(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("SGLANG_SPEC_NAN_DETECTION", "SGLANG_SPEC_OOB_DETECTION", "SGLANG_DEBUG_POISON"):
        monkeypatch.delenv(name, raising=False)
    detect.reset()
    yield
    detect.reset()


def make_backend(
    seq_lens: list[int],
    *,
    topk: int,
    device: str = "cpu",
    kv_provider: str = "torch",
    attention_provider: str = "torch",
    shape: MLAShape = SHAPE,
    dtype: torch.dtype = torch.float32,
    max_context_len: int = MAX_CONTEXT_LEN,
) -> tuple[FlashInferMLAMultiStepDraftBackend, list[int]]:
    pool = ReqToTokenPool(size=4, max_context_len=max_context_len, device=torch.device(device))
    kv_pool = MLATokenToKVPool(
        num_pages=160,
        page_size=1,
        kv_lora_rank=shape.kv_lora_rank,
        qk_rope_head_dim=shape.qk_rope_head_dim,
        num_layers=1,
        dtype=dtype,
        device=torch.device(device),
    )
    generator = torch.Generator().manual_seed(11)
    kv_pool.kv_buffers[0].copy_(torch.randn(kv_pool.kv_buffers[0].shape, generator=generator))
    allocator = PagedTokenAllocator(num_pages=160, page_size=1, seed=5)
    rows = pool.alloc(len(seq_lens))
    for row, seq_len in zip(rows, seq_lens, strict=True):
        allocator.extend(pool, row=row, old_len=0, new_len=seq_len + topk * NUM_STEPS)
    backend = FlashInferMLAMultiStepDraftBackend(
        req_to_token_pool=pool,
        kv_pool=kv_pool,
        shape=shape,
        topk=topk,
        speculative_num_steps=NUM_STEPS,
        kv_indices_provider=kv_provider,
        attention_provider=attention_provider,
    )
    return backend, rows


def draft_batch(
    backend: FlashInferMLAMultiStepDraftBackend, rows: torch.Tensor, seq_lens: torch.Tensor
) -> ForwardBatch:
    bs = int(seq_lens.shape[0])
    zeros = torch.zeros(bs * backend.topk, dtype=torch.int64, device=seq_lens.device)
    return ForwardBatch(
        forward_mode=ForwardMode.DECODE,
        batch_size=bs,
        input_ids=zeros,
        req_pool_indices=rows,
        seq_lens=seq_lens,
        seq_lens_cpu=seq_lens.cpu(),
        out_cache_loc=zeros,
        positions=zeros,
        req_to_token_pool=backend.req_to_token_pool,
        token_to_kv_pool=backend.kv_pool,
        spec_info=DraftDecodeInput(topk=backend.topk, num_steps=NUM_STEPS),
    )


def queries(backend: FlashInferMLAMultiStepDraftBackend, bs: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(3)
    lead = (backend.num_attention_steps, bs * backend.topk, backend.shape.num_heads)
    q_nope = torch.randn(*lead, backend.shape.kv_lora_rank, generator=generator)
    q_pe = torch.randn(*lead, backend.shape.qk_rope_head_dim, generator=generator)
    dtype, device = backend.kv_pool.dtype, backend.device
    return q_nope.to(device, dtype), q_pe.to(device, dtype)


def naive_step(
    backend: FlashInferMLAMultiStepDraftBackend,
    rows: list[int],
    seq_lens: list[int],
    *,
    step: int,
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
) -> torch.Tensor:
    """Row (request b, branch k) attends its prefix, then branch k's first step + 1 drafts."""
    table = backend.req_to_token_pool.req_to_token.cpu()
    cache = backend.kv_pool.kv_buffers[0].float().cpu().reshape(160, -1)
    rank = backend.shape.kv_lora_rank
    out = torch.zeros(q_nope.shape)
    for b, (row, seq_len) in enumerate(zip(rows, seq_lens, strict=True)):
        for k in range(backend.topk):
            first = seq_len + k * NUM_STEPS
            slots = torch.cat([table[row, :seq_len], table[row, first : first + step + 1]])
            keys = cache[slots.long()]
            z = b * backend.topk + k
            scores = torch.einsum("hd,ld->hl", q_nope[z].float().cpu(), keys[:, :rank])
            scores += torch.einsum("hd,ld->hl", q_pe[z].float().cpu(), keys[:, rank:])
            out[z] = torch.softmax(scores * backend.shape.sm_scale, -1) @ keys[:, :rank]
    return out


def eager_outputs(
    backend: FlashInferMLAMultiStepDraftBackend,
    rows: list[int],
    seq_lens: list[int],
    q: tuple[torch.Tensor, ...],
) -> torch.Tensor:
    device = backend.device
    backend.init_forward_metadata(
        draft_batch(
            backend,
            torch.tensor(rows, device=device),
            torch.tensor(seq_lens, dtype=torch.int32, device=device),
        )
    )
    return torch.stack(
        [backend.forward_decode(s, q[0][s], q[1][s]) for s in range(backend.num_attention_steps)]
    )


def graph_outputs(
    backend: FlashInferMLAMultiStepDraftBackend,
    rows: list[int],
    seq_lens: list[int],
    q: tuple[torch.Tensor, ...],
    *,
    max_bs: int,
) -> torch.Tensor:
    """Capture at capture-time lengths (1) for `max_bs`, then replay the live batch."""
    device = backend.device
    backend.init_cuda_graph_state(max_bs, max_bs * backend.topk)
    row_buffer = torch.zeros(max_bs, dtype=torch.int64, device=device)
    len_buffer = torch.ones(max_bs, dtype=torch.int32, device=device)
    q_nope, q_pe = torch.zeros_like(q[0]), torch.zeros_like(q[1])
    backend.init_forward_metadata_capture_cuda_graph(draft_batch(backend, row_buffer, len_buffer))
    graph = capture(
        lambda: torch.stack(
            [
                backend.forward_decode(s, q_nope[s], q_pe[s])
                for s in range(backend.num_attention_steps)
            ]
        ),
        device=torch.device(device),
    )
    row_buffer.copy_(torch.tensor(rows))
    len_buffer.copy_(torch.tensor(seq_lens))
    q_nope.copy_(q[0])
    q_pe.copy_(q[1])
    backend.init_forward_metadata_replay_cuda_graph(draft_batch(backend, row_buffer, len_buffer))
    return graph.replay().clone()


@dataclass(frozen=True)
class FakePlanMetadata:
    """flashinfer.mla.MLAPlanMetadata's CSR form (0.7.2.post1), keyword-built."""

    qo_indptr: torch.Tensor
    kv_indptr: torch.Tensor
    kv_indices: torch.Tensor
    kv_len_arr: torch.Tensor

    @classmethod
    def csr(cls, **tensors: torch.Tensor) -> FakePlanMetadata:
        return cls(**tensors)


class FakeGraphWrapper:
    """CPU stand-in for flashinfer.mla.BatchMLAPagedAttentionWrapper(use_cuda_graph=True).

    It enforces the bound-buffer contract of flashinfer 0.7.2.post1
    (`_fa_common._validate_graph_metadata_buffers`): int32, contiguous, and exactly the
    shape of the plan's metadata, except kv_indices which may be longer; plan() then
    copies the metadata into the bound buffers. Only the non-deprecated keyword API is
    accepted. run() attends through the bound buffers with the torch reference.
    """

    def __init__(
        self, workspace: torch.Tensor, *, use_cuda_graph: bool, **bound: torch.Tensor
    ) -> None:
        assert use_cuda_graph and workspace.dtype == torch.uint8
        self.bound = bound
        self.sm_scale: float | None = None

    def plan(
        self,
        *,
        metadata: FakePlanMetadata,
        page_size: int,
        sm_scale: float,
        query_layout: str,
        kv_cache_layout: str,
        **options: object,
    ) -> None:
        for name, reserved in self.bound.items():
            given = getattr(metadata, name)
            fits = (
                reserved.shape[0] >= given.shape[0]
                if name == "kv_indices"
                else reserved.shape == given.shape
            )
            if reserved.dtype != torch.int32 or not reserved.is_contiguous() or not fits:
                raise ValueError(
                    f"CUDA graph reserved {name} buffer has insufficient or incompatible capacity."
                )
        for name, reserved in self.bound.items():
            given = getattr(metadata, name)
            reserved[: given.shape[0]].copy_(given)
        assert (page_size, query_layout, kv_cache_layout) == (1, "split", "packed")
        self.sm_scale = sm_scale

    def run(
        self, *, query: tuple[torch.Tensor, torch.Tensor], kv_cache: torch.Tensor
    ) -> torch.Tensor:
        q_nope, q_pe = query
        assert self.sm_scale is not None, "run() before plan()"
        shape = MLAShape(
            num_heads=q_nope.shape[1],
            kv_lora_rank=q_nope.shape[2],
            qk_rope_head_dim=q_pe.shape[2],
            sm_scale=self.sm_scale,
        )
        return mla_paged_decode_torch(
            q_nope=q_nope,
            q_pe=q_pe,
            kv_cache=kv_cache,
            kv_indptr=self.bound["kv_indptr"],
            kv_indices=self.bound["kv_indices"],
            shape=shape,
            max_kv_len=MAX_CONTEXT_LEN,
        )


@pytest.fixture
def fake_flashinfer(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("flashinfer")
    module.mla = types.SimpleNamespace(  # type: ignore[attr-defined]
        BatchMLAPagedAttentionWrapper=FakeGraphWrapper, MLAPlanMetadata=FakePlanMetadata
    )
    monkeypatch.setitem(sys.modules, "flashinfer", module)


@pytest.mark.parametrize("topk", [1, 2, 4])
def test_eager_path_attends_each_branch_to_its_prefix_and_its_drafts(topk: int) -> None:
    seq_lens = [5, 3]
    backend, rows = make_backend(seq_lens, topk=topk, max_context_len=24)
    q = queries(backend, len(seq_lens))
    out = eager_outputs(backend, rows, seq_lens, q)
    for step in range(backend.num_attention_steps):
        expected = naive_step(
            backend, rows, seq_lens, step=step, q_nope=q[0][step], q_pe=q[1][step]
        )
        torch.testing.assert_close(out[step], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("topk", "seq_lens"), [(1, [9, 7]), (2, [7, 6]), (4, [8, 7])])
def test_graph_replay_with_long_sequences_matches_the_eager_path(
    topk: int, seq_lens: list[int]
) -> None:
    backend, rows = make_backend(seq_lens, topk=topk, max_context_len=24)
    q = queries(backend, len(seq_lens))
    replayed = graph_outputs(backend, rows, seq_lens, q, max_bs=2)
    torch.testing.assert_close(replayed, eager_outputs(backend, rows, seq_lens, q))


@pytest.mark.usefixtures("fake_flashinfer")
def test_flashinfer_graph_wrappers_bind_kv_indptr_sized_to_the_planned_batch() -> None:
    """flashinfer refuses a bound kv_indptr longer than the plan's (was: a whole row)."""
    backend, rows = make_backend([7, 6], topk=2, attention_provider="flashinfer")
    q = queries(backend, 2)
    replayed = graph_outputs(backend, rows, [7, 6], q, max_bs=2)
    assert sorted(backend.graph_wrappers) == [(0, 4), (1, 4), (2, 4)]
    for (step, _), decode in backend.graph_wrappers.items():
        bound = decode.wrapper.bound
        assert tuple(bound["kv_indptr"].shape) == (5,)
        assert bound["kv_indptr"].data_ptr() == backend.kv_indptr[step].data_ptr()
        expected = naive_step(backend, rows, [7, 6], step=step, q_nope=q[0][step], q_pe=q[1][step])
        torch.testing.assert_close(replayed[step], expected, atol=1e-5, rtol=1e-5)


def test_graph_rows_are_max_bs_times_topk_times_max_context_len_wide() -> None:
    backend, _ = make_backend([3], topk=2)
    backend.init_cuda_graph_state(3, 6)
    assert backend.cuda_graph_kv_indices is not None
    assert tuple(backend.cuda_graph_kv_indices.shape) == (NUM_STEPS, 3 * 2 * MAX_CONTEXT_LEN)


def test_a_row_too_narrow_is_refused_before_launch_naming_every_factor() -> None:
    backend, rows = make_backend([7, 6], topk=2)
    batch = draft_batch(backend, torch.tensor(rows), torch.tensor([7, 6], dtype=torch.int32))
    narrow = torch.zeros((NUM_STEPS, 32), dtype=torch.int32)
    with pytest.raises(OOBDetected) as info:
        backend.common_template(batch, narrow, lambda step, bs: None)
    assert str(info.value) == (
        "flashinfer_mla: EAGLE draft kv_indices row too small: step 3 needs 42 entries = "
        "seq_lens_sum 13 * topk 2 + num_seqs 2 * topk 2 * (step 3 + 1), but the row width is "
        "32; size the buffer max_bs * topk * max_context_len (max_context_len 16)"
    )
    assert torch.equal(narrow, torch.zeros_like(narrow)), "the kernel ran"


def test_reverted_27460_graph_rows_lose_the_topk_factor() -> None:
    backend, _ = make_backend([3], topk=2)
    with prtoggle.reverted(27460):
        backend.init_cuda_graph_state(2, 4)
    assert backend.cuda_graph_kv_indices is not None
    assert tuple(backend.cuda_graph_kv_indices.shape) == (NUM_STEPS, 2 * MAX_CONTEXT_LEN)


def test_reverted_27460_overflow_is_named_by_the_row_width_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_SPEC_OOB_DETECTION", "1")
    backend, rows = make_backend([7, 6], topk=2)
    q = queries(backend, 2)
    with prtoggle.reverted(27460), pytest.raises(OOBDetected) as info:
        graph_outputs(backend, rows, [7, 6], q, max_bs=2)
    message = str(info.value)
    assert "oob at flashinfer_mla.draft_kv_indices[step=1].row_width" in message
    assert "value 34 outside [0, 33)" in message


def test_reverted_27460_without_probes_replays_wrong_attention(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_DEBUG_POISON", "1")  # the last row's spill lands in a redzone
    backend, rows = make_backend([7, 6], topk=2)
    q = queries(backend, 2)
    with prtoggle.reverted(27460):
        replayed = graph_outputs(backend, rows, [7, 6], q, max_bs=2)
    eager = eager_outputs(backend, rows, [7, 6], q)
    torch.testing.assert_close(replayed[0], eager[0])  # row 0 (30 entries) still fits
    assert not torch.allclose(replayed[1], eager[1]), "step 1 read row 2's entries"


@pytest.mark.gpu
@pytest.mark.parametrize("attention_provider", ["torch", "flashinfer"])
def test_cuda_graph_replay_matches_eager_on_gpu(attention_provider: str) -> None:
    shape = SHAPE
    dtype = torch.float32
    if attention_provider == "flashinfer":
        shape = MLAShape(num_heads=16, kv_lora_rank=512, qk_rope_head_dim=64, sm_scale=576**-0.5)
        dtype = torch.bfloat16
    backend, rows = make_backend(
        [7, 6],
        topk=2,
        device="cuda",
        kv_provider="triton",
        attention_provider=attention_provider,
        shape=shape,
        dtype=dtype,
    )
    q = queries(backend, 2)
    replayed = graph_outputs(backend, rows, [7, 6], q, max_bs=2)
    eager = eager_outputs(backend, rows, [7, 6], q)
    torch.testing.assert_close(replayed.float(), eager.float(), atol=2e-2, rtol=2e-2)
