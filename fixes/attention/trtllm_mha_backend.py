"""TRT-LLM MHA attention backend: metadata per forward mode, CUDA graphs, kernel routing."""

from __future__ import annotations

import torch

from fixes.attention.base import AttentionBackend, AttentionLayer, MultiStepDraftBackend
from fixes.attention.trtllm_mha_metadata import (
    GRAPH_KINDS,
    ForwardMetadata,
    GraphBuffers,
    cumsum_with_zero,
    extend_query_lengths,
    graph_kind,
    mode_site,
    query_lengths,
)
from fixes.errors import AttentionBackendError
from fixes.forward_batch import (
    ForwardBatch,
    ForwardMode,
    SpecInput,
    is_draft_decode,
)
from fixes.kernels.trtllm_fmha import (
    trtllm_batch_context_with_kv_cache,
    trtllm_batch_decode_with_kv_cache,
)
from fixes.memory_pool import MHATokenToKVPool, ReqToTokenPool
from prtoggle import detect

__all__ = ["TRTLLMHAAttnBackend", "TRTLLMHAAttnMultiStepDraftBackend"]


class TRTLLMHAAttnBackend(AttentionBackend):
    """Paged MHA attention through the TRT-LLM FMHA decode and context kernels.

    `speculative_step_id` is the draft step this instance serves in a multi-step draft
    backend: at step i a request attends to its prefix plus i + 1 draft tokens. The decode
    kernel gets `max_seq_len = max_context_len` (not the batch maximum), so that a CUDA
    graph captured with fill-value lengths still covers every key at replay.

    Lengths: `seq_lens` is the KV length after the forward (ForwardBatch's convention),
    except for draft decode, where it is the prefix length and step i adds i + 1.
    """

    def __init__(
        self,
        *,
        req_to_token_pool: ReqToTokenPool,
        token_to_kv_pool: MHATokenToKVPool,
        provider: str | None = None,
        speculative_step_id: int = 0,
    ) -> None:
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool = token_to_kv_pool
        self.provider = provider
        self.speculative_step_id = speculative_step_id
        self.device = token_to_kv_pool.device
        self.page_size = token_to_kv_pool.page_size
        self.max_context_len = req_to_token_pool.max_context_len
        self.forward_metadata: ForwardMetadata | None = None
        self._graph_buffers: dict[str, GraphBuffers] = {}
        self._graph_metadata: dict[tuple[str, int], ForwardMetadata] = {}

    @property
    def max_pages_per_req(self) -> int:
        return -(-self.max_context_len // self.page_size)

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        """Build metadata for an eager forward from the batch (real requests only)."""
        mode = forward_batch.forward_mode
        seq_lens, spec_info = forward_batch.seq_lens, forward_batch.spec_info
        bs = int(seq_lens.shape[0])
        max_seq_len = int(forward_batch.seq_lens_cpu.max()) if bs else 0
        extra = self.speculative_step_id + 1 if is_draft_decode(mode, spec_info) else 0
        cache_seq_lens = (seq_lens + extra).to(torch.int32)
        max_seq_len_k = max_seq_len + extra
        if mode is ForwardMode.EXTEND:
            q_lens, max_seq_len_q = extend_query_lengths(forward_batch)
        else:
            kind = graph_kind(mode, spec_info)
            q_lens, max_seq_len_q = query_lengths(kind, bs, spec_info, self.device)
        pages = -(-max_seq_len_k // self.page_size)
        metadata = ForwardMetadata(
            cache_seq_lens=cache_seq_lens,
            cu_seq_lens_q=cumsum_with_zero(q_lens),
            cu_seq_lens_k=cumsum_with_zero(cache_seq_lens),
            page_table=torch.zeros((bs, pages), dtype=torch.int32, device=self.device),
            max_seq_len_q=max_seq_len_q,
            max_seq_len_k=max_seq_len_k,
        )
        self._write_page_table(metadata, forward_batch.req_pool_indices)
        self.forward_metadata = metadata

    def init_cuda_graph_state(self, *, max_bs: int) -> None:
        """Pre-allocate metadata buffers for graphs of up to `max_bs` requests."""
        for kind in GRAPH_KINDS:
            self._graph_buffers[kind] = GraphBuffers.allocate(
                mode_name=f"{kind}[step={self.speculative_step_id}]",
                max_bs=max_bs,
                max_pages=self.max_pages_per_req,
                device=self.device,
            )
        self._graph_metadata.clear()

    def init_forward_metadata_capture_cuda_graph(
        self,
        *,
        bs: int,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        forward_mode: ForwardMode,
        spec_info: SpecInput | None,
    ) -> None:
        """Bind metadata to graph buffers for batch size `bs` and fill them from the inputs.

        `req_pool_indices` and `seq_lens` are the runner's static buffers (`seq_lens` hold
        the capture fill value); the warm-up runs and the capture read what is written here.
        """
        kind = graph_kind(forward_mode, spec_info)
        buffers = self._require_graph_buffers(kind)
        if is_draft_decode(forward_mode, spec_info):
            # Draft decode: step i attends to the prefix plus i + 1 draft tokens.
            cache_seq_lens = buffers.cache_seq_lens[:bs]
            cache_seq_lens.copy_(seq_lens + self.speculative_step_id + 1)
            max_seq_len_k = int(seq_lens.max().item()) + self.speculative_step_id + 1
            q_lens = torch.ones(bs, dtype=torch.int32, device=self.device)
            max_seq_len_q = 1
        else:
            cache_seq_lens = buffers.cache_seq_lens[:bs]
            cache_seq_lens.copy_(seq_lens)
            max_seq_len_k = int(seq_lens.max().item())
            q_lens, max_seq_len_q = query_lengths(kind, bs, spec_info, self.device)
        metadata = ForwardMetadata(
            cache_seq_lens=cache_seq_lens,
            cu_seq_lens_q=buffers.cu_seq_lens_q[: bs + 1],
            cu_seq_lens_k=buffers.cu_seq_lens_k[: bs + 1],
            page_table=buffers.page_table[:bs],
            max_seq_len_q=max_seq_len_q,
            max_seq_len_k=max_seq_len_k,
        )
        metadata.cu_seq_lens_q.copy_(cumsum_with_zero(q_lens))
        metadata.cu_seq_lens_k.copy_(cumsum_with_zero(cache_seq_lens))
        self._write_page_table(metadata, req_pool_indices[:bs])
        self._graph_metadata[(kind, bs)] = metadata
        self.forward_metadata = metadata

    def init_forward_metadata_replay_cuda_graph(
        self,
        *,
        bs: int,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        seq_lens_cpu: torch.Tensor,
        forward_mode: ForwardMode,
        spec_info: SpecInput | None,
    ) -> None:
        """Copy live lengths and pages into the buffers the graph of size `bs` reads."""
        kind = graph_kind(forward_mode, spec_info)
        metadata = self._graph_metadata.get((kind, bs))
        if metadata is None:
            captured = sorted(b for k, b in self._graph_metadata if k == kind)
            raise AttentionBackendError(
                f"replay of a {kind} graph for bs={bs}: no such capture; captured batch "
                f"sizes for {kind}: {captured}"
            )
        extra = self.speculative_step_id + 1 if is_draft_decode(forward_mode, spec_info) else 0
        metadata.cache_seq_lens.copy_(seq_lens[:bs] + extra)
        metadata.max_seq_len_k = int(seq_lens_cpu[:bs].max()) + extra
        if kind != "decode":
            q_lens, metadata.max_seq_len_q = query_lengths(kind, bs, spec_info, self.device)
            metadata.cu_seq_lens_q.copy_(cumsum_with_zero(q_lens))
        metadata.cu_seq_lens_k.copy_(cumsum_with_zero(metadata.cache_seq_lens))
        self._write_page_table(metadata, req_pool_indices[:bs])
        self.forward_metadata = metadata

    def forward_decode(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer: AttentionLayer,
        forward_batch: ForwardBatch,
        *,
        save_kv_cache: bool = True,
    ) -> torch.Tensor:
        """One query row per request through the decode kernel; returns `[rows, Hq*D]`."""
        metadata, site, query = self._prepare(
            q, k, v, layer, forward_batch, save_kv_cache=save_kv_cache
        )
        out = self._run_decode_kernel(query, metadata, layer, q_len_per_req=1)
        return self._checked_output(out, site, layer)

    def forward_extend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer: AttentionLayer,
        forward_batch: ForwardBatch,
        *,
        save_kv_cache: bool = True,
    ) -> torch.Tensor:
        """Several query rows per request; only TARGET_VERIFY (uniform rows) uses decode."""
        metadata, site, query = self._prepare(
            q, k, v, layer, forward_batch, save_kv_cache=save_kv_cache
        )
        out = torch.zeros_like(query)
        if forward_batch.forward_mode.is_target_verify():
            q_len_per_req = metadata.max_seq_len_q
            rows_needed = int(metadata.cache_seq_lens.shape[0]) * q_len_per_req
            detect.maybe_check_host_range(
                rows_needed,
                0,
                int(query.shape[0]) + 1,
                "trtllm_mha.forward_extend.decode_query_rows",
            )
            self._run_decode_kernel(query, metadata, layer, q_len_per_req=q_len_per_req, out=out)
        else:
            batch_size = metadata.cu_seq_lens_q.shape[0] - 1
            detect.maybe_check_host_range(
                batch_size,
                0,
                int(metadata.cu_seq_lens_q.shape[0]),
                "trtllm_mha.forward_extend.batch_size",
            )
            k_cache, v_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)
            trtllm_batch_context_with_kv_cache(
                query=query,
                k_cache=k_cache,
                v_cache=v_cache,
                block_tables=metadata.page_table,
                seq_lens=metadata.cache_seq_lens,
                max_q_len=metadata.max_seq_len_q,
                max_kv_len=self.max_context_len,
                softmax_scale=layer.scaling,
                batch_size=batch_size,
                cum_seq_lens_q=metadata.cu_seq_lens_q,
                cum_seq_lens_kv=metadata.cu_seq_lens_k,
                out=out,
                provider=self.provider,
            )
        return self._checked_output(out, site, layer)

    def _prepare(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer: AttentionLayer,
        forward_batch: ForwardBatch,
        *,
        save_kv_cache: bool,
    ) -> tuple[ForwardMetadata, str, torch.Tensor]:
        """Write the new K/V, probe the metadata once per forward, shape the query."""
        metadata = self.forward_metadata
        if metadata is None:
            raise AttentionBackendError(
                "forward before init_forward_metadata (eager) or "
                "init_forward_metadata_capture/replay_cuda_graph (graph); call one first"
            )
        if save_kv_cache:
            kv_shape = (-1, layer.num_kv_heads, layer.head_dim)
            self.token_to_kv_pool.set_kv_buffer(
                layer.layer_id, forward_batch.out_cache_loc, k.view(kv_shape), v.view(kv_shape)
            )
        mode, spec_info = forward_batch.forward_mode, forward_batch.spec_info
        site = mode_site(mode, spec_info, self.speculative_step_id)
        if layer.layer_id == 0:
            draft = is_draft_decode(mode, spec_info)
            metadata.probe(
                site=site,
                min_kv_len=self.speculative_step_id + 1 if draft else 1,
                max_context_len=self.max_context_len,
                num_pages=self.token_to_kv_pool.num_pages,
                page_size=self.page_size,
            )
        return metadata, site, q.view(-1, layer.num_q_heads, layer.head_dim)

    def _run_decode_kernel(
        self,
        query: torch.Tensor,
        metadata: ForwardMetadata,
        layer: AttentionLayer,
        *,
        q_len_per_req: int,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The decode kernel over `q_len_per_req` rows per request (decode and verify)."""
        k_cache, v_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)
        return trtllm_batch_decode_with_kv_cache(
            query=query,
            k_cache=k_cache,
            v_cache=v_cache,
            block_tables=metadata.page_table,
            seq_lens=metadata.cache_seq_lens,
            max_seq_len=self.max_context_len,
            softmax_scale=layer.scaling,
            q_len_per_req=q_len_per_req,
            out=out,
            provider=self.provider,
        )

    def _checked_output(self, out: torch.Tensor, site: str, layer: AttentionLayer) -> torch.Tensor:
        """NaN probe on the attention output, then `[rows, Hq*D]`."""
        detect.maybe_detect_nan(out, f"{site}.layer[{layer.layer_id}].output")
        return out.view(-1, layer.num_q_heads * layer.head_dim)

    def _write_page_table(self, metadata: ForwardMetadata, req_pool_indices: torch.Tensor) -> None:
        metadata.write_page_table(
            req_to_token=self.req_to_token_pool.req_to_token,
            req_pool_indices=req_pool_indices,
            page_size=self.page_size,
        )

    def _require_graph_buffers(self, kind: str) -> GraphBuffers:
        buffers = self._graph_buffers.get(kind)
        if buffers is None:
            raise AttentionBackendError(
                f"CUDA graph capture of kind {kind!r} before init_cuda_graph_state(max_bs=...); "
                "call it once before capturing"
            )
        return buffers


class TRTLLMHAAttnMultiStepDraftBackend(MultiStepDraftBackend):
    """One TRT-LLM MHA backend per draft step (`speculative_step_id = i`), topk = 1."""

    def __init__(
        self,
        *,
        req_to_token_pool: ReqToTokenPool,
        token_to_kv_pool: MHATokenToKVPool,
        num_steps: int,
        topk: int = 1,
        provider: str | None = None,
    ) -> None:
        if topk != 1 or num_steps < 1:
            raise AttentionBackendError(
                f"TRT-LLM MHA multi-step draft: got topk={topk}, num_steps={num_steps}; "
                "expected topk=1 (the only one supported) and num_steps >= 1"
            )
        backends = [
            TRTLLMHAAttnBackend(
                req_to_token_pool=req_to_token_pool,
                token_to_kv_pool=token_to_kv_pool,
                provider=provider,
                speculative_step_id=step,
            )
            for step in range(num_steps)
        ]
        super().__init__(backends, topk=topk)
