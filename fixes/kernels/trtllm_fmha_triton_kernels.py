"""Triton kernels of the TRT-LLM FMHA contract: split-KV paged decode, split merge, context."""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["combine_splits_kernel", "context_kernel", "decode_kernel"]


@triton.jit
def _token_pages(table_row, tokens, token_mask, PAGE_SIZE: tl.constexpr, MASKED: tl.constexpr):  # type: ignore[no-untyped-def]
    """int64 page index of each token, read from the request's page-table row."""
    if MASKED:
        pages = tl.load(table_row + tokens // PAGE_SIZE, mask=token_mask, other=0)
    else:
        pages = tl.load(table_row + tokens // PAGE_SIZE)
    return pages.to(tl.int64)


@triton.jit
def _load_tile(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    cache,
    pages,
    tokens,
    token_mask,
    kv_head,
    stride_page,
    stride_slot,
    stride_head,
    dims,
    PAGE_SIZE: tl.constexpr,
    MASKED: tl.constexpr,
):
    """[BLOCK_N, HEAD_DIM] tile of one KV head for `tokens` living in `pages`."""
    offsets = pages * stride_page + (tokens % PAGE_SIZE) * stride_slot + kv_head * stride_head
    pointers = cache + offsets[:, None] + dims[None, :]
    if MASKED:
        return tl.load(pointers, mask=token_mask[:, None], other=0.0)
    return tl.load(pointers)


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr, UPCAST: tl.constexpr):  # type: ignore[no-untyped-def]
    """a @ b accumulated in fp32; UPCAST: 16-bit operands widened first (interpreter only)."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _softmax_step(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    q,
    k,
    v,
    allowed,
    m_i,
    l_i,
    acc,
    scale_log2,
    PRECISION: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
    MASKED: tl.constexpr,
):
    """One K/V tile of online softmax (base 2). A row with no allowed key keeps m = -inf,
    l = 0, acc = 0, so that a row that never sees a key ends as 0/0 = NaN."""
    qk = _dot(q, tl.trans(k), PRECISION, UPCAST_DOT) * scale_log2
    if MASKED:
        qk = tl.where(allowed, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(qk - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, PRECISION, UPCAST_DOT)
    return m_new, l_i, acc


@triton.jit
def decode_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    Q,
    K,
    V,
    BlockTables,
    SeqLens,
    CumSeqLensQ,
    Out,
    PartialOut,
    PartialLse,
    q_window,
    chunks_per_req,
    scale_log2,
    chunk,
    num_splits,
    num_heads,
    stride_qr,
    stride_qh,
    stride_kp,
    stride_ks,
    stride_kh,
    stride_vp,
    stride_vs,
    stride_vh,
    stride_bt,
    stride_or,
    stride_oh,
    GROUP: tl.constexpr,
    Q_ROWS: tl.constexpr,
    TILE_M: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLIT: tl.constexpr,
    VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    """Q_ROWS query rows x GROUP heads of one request and KV head share each K/V tile.
    VARLEN: request b owns rows cum_seq_lens_q[b] + i for i < min(q_len_b, q_window);
    otherwise every request owns q_window rows. Split-KV partials sit at b * q_window + i."""
    request = tl.program_id(0) // chunks_per_req
    first_row = tl.program_id(0) % chunks_per_req * Q_ROWS
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    tile = tl.arange(0, TILE_M)
    i = first_row + tile // GROUP  # query index within the request
    if VARLEN:
        q_start = tl.load(CumSeqLensQ + request)
        q_len = tl.load(CumSeqLensQ + request + 1) - q_start
        rows_end = tl.minimum(q_len, q_window)  # rows past max_q_len are not computed
    else:
        q_start = request * q_window
        q_len = q_window
        rows_end = q_window
    valid = (tile < Q_ROWS * GROUP) & (i < rows_end)
    heads = kv_head * GROUP + tile % GROUP
    rows = (q_start + i).to(tl.int64)
    seq_len = tl.load(SeqLens + request)
    num_keys = seq_len - q_len + i + 1  # row i attends keys [0, num_keys)
    last_i = tl.minimum(first_row + Q_ROWS, rows_end) - 1
    max_keys = seq_len - q_len + last_i + 1
    start = split * chunk
    end = tl.where(split == num_splits - 1, max_keys, tl.minimum(start + chunk, max_keys))
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(
        Q + rows[:, None] * stride_qr + heads[:, None] * stride_qh + dims[None, :],
        mask=valid[:, None],
        other=0.0,
    )
    table_row = BlockTables + request.to(tl.int64) * stride_bt
    m_i = tl.full([TILE_M], float("-inf"), tl.float32)
    l_i = tl.zeros([TILE_M], tl.float32)
    acc = tl.zeros([TILE_M, HEAD_DIM], tl.float32)
    for n0 in range(start, end, BLOCK_N):
        tokens = n0 + tl.arange(0, BLOCK_N)
        token_mask = tokens < end
        pages = _token_pages(table_row, tokens, token_mask, PAGE_SIZE, True)
        k = _load_tile(
            K,
            pages,
            tokens,
            token_mask,
            kv_head,
            stride_kp,
            stride_ks,
            stride_kh,
            dims,
            PAGE_SIZE,
            True,
        )
        v = _load_tile(
            V,
            pages,
            tokens,
            token_mask,
            kv_head,
            stride_vp,
            stride_vs,
            stride_vh,
            dims,
            PAGE_SIZE,
            True,
        )
        allowed = tokens[None, :] < num_keys[:, None]
        m_i, l_i, acc = _softmax_step(
            q, k, v, allowed, m_i, l_i, acc, scale_log2, PRECISION, UPCAST_DOT, True
        )
    if SPLIT:
        slot = (((request * q_window + i).to(tl.int64)) * num_heads + heads) * num_splits + split
        safe = tl.where(l_i[:, None] > 0, acc / l_i[:, None], 0.0)
        tl.store(PartialOut + slot[:, None] * HEAD_DIM + dims[None, :], safe, mask=valid[:, None])
        tl.store(PartialLse + slot, m_i + tl.log2(l_i), mask=valid)  # no key: -inf
    else:
        result = acc / l_i[:, None]  # 0/0 = NaN over an empty key range, as in trtllm-gen
        pointers = Out + rows[:, None] * stride_or + heads[:, None] * stride_oh + dims[None, :]
        tl.store(pointers, result.to(Out.dtype.element_ty), mask=valid[:, None])


@triton.jit
def combine_splits_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    PartialOut,
    PartialLse,
    CumSeqLensQ,
    Out,
    num_splits,
    q_window,
    stride_or,
    stride_oh,
    HEAD_DIM: tl.constexpr,
    SPLITS_PAD: tl.constexpr,
    VARLEN: tl.constexpr,
):
    """Merges the splits of partial row b * q_window + i into its output row (see above)."""
    slot_row = tl.program_id(0)
    head = tl.program_id(1)
    splits = tl.arange(0, SPLITS_PAD)
    split_mask = splits < num_splits
    dims = tl.arange(0, HEAD_DIM)
    if VARLEN:
        request = slot_row // q_window
        i = slot_row % q_window
        q_start = tl.load(CumSeqLensQ + request)
        q_len = tl.load(CumSeqLensQ + request + 1) - q_start
        out_row = (q_start + i).to(tl.int64)
        computed = dims < tl.where(i < q_len, HEAD_DIM, 0)  # rows past q_len left untouched
    else:
        out_row = slot_row.to(tl.int64)
        computed = dims < HEAD_DIM
    base = (slot_row.to(tl.int64) * tl.num_programs(1) + head) * num_splits
    lse = tl.load(PartialLse + base + splits, mask=split_mask, other=float("-inf"))
    parts = tl.load(
        PartialOut + (base + splits)[:, None] * HEAD_DIM + dims[None, :],
        mask=split_mask[:, None],
        other=0.0,
    )
    weights = tl.exp2(lse - tl.max(lse, 0))  # all splits empty: exp2(nan) -> NaN output
    result = tl.sum(weights[:, None] * parts, 0) / tl.sum(weights, 0)
    tl.store(
        Out + out_row * stride_or + head * stride_oh + dims,
        result.to(Out.dtype.element_ty),
        mask=computed,
    )


@triton.jit
def context_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    Q,
    K,
    V,
    BlockTables,
    SeqLens,
    CumSeqLensQ,
    Out,
    scale_log2,
    max_q_len,
    stride_qr,
    stride_qh,
    stride_kp,
    stride_ks,
    stride_kh,
    stride_vp,
    stride_vs,
    stride_vh,
    stride_bt,
    stride_or,
    stride_oh,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HEADS_FASTEST: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    """HEADS_FASTEST: grid (head, block, request): launch order walks all heads of a query
    block (a GQA group reads the same K/V tiles at once), then the request's blocks from the
    longest causal one down, then requests, so one request's K/V stays in L2 while its
    programs run and the grid ends on short blocks. Otherwise grid (block, request, head),
    longest causal block of each (request, head) first."""
    if HEADS_FASTEST:
        head = tl.program_id(0)
        block = tl.num_programs(1) - 1 - tl.program_id(1)
        request = tl.program_id(2)
    else:
        block = tl.num_programs(0) - 1 - tl.program_id(0)
        request = tl.program_id(1)
        head = tl.program_id(2)
    q_start = tl.load(CumSeqLensQ + request)
    q_len = tl.load(CumSeqLensQ + request + 1) - q_start
    kv_len = tl.load(SeqLens + request)
    m_start = block * BLOCK_M
    rows_end = tl.minimum(q_len, max_q_len)  # rows past max_q_len are not computed
    if m_start < rows_end:
        kv_head = head // GROUP
        rows = m_start + tl.arange(0, BLOCK_M)
        row_mask = rows < rows_end
        dims = tl.arange(0, HEAD_DIM)
        token_rows = (q_start + rows).to(tl.int64)
        q = tl.load(
            Q + token_rows[:, None] * stride_qr + head * stride_qh + dims[None, :],
            mask=row_mask[:, None],
            other=0.0,
        )
        table_row = BlockTables + request.to(tl.int64) * stride_bt
        diagonal = kv_len - q_len  # row r attends keys [0, diagonal + r]
        full_end = tl.maximum(diagonal + m_start + 1, 0) // BLOCK_N * BLOCK_N
        hi = tl.minimum(kv_len, diagonal + m_start + BLOCK_M)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        for n0 in range(0, full_end, BLOCK_N):  # every row of the block sees every key
            tokens = n0 + tl.arange(0, BLOCK_N)
            pages = _token_pages(table_row, tokens, tokens < hi, PAGE_SIZE, False)
            k = _load_tile(
                K,
                pages,
                tokens,
                tokens < hi,
                kv_head,
                stride_kp,
                stride_ks,
                stride_kh,
                dims,
                PAGE_SIZE,
                False,
            )
            v = _load_tile(
                V,
                pages,
                tokens,
                tokens < hi,
                kv_head,
                stride_vp,
                stride_vs,
                stride_vh,
                dims,
                PAGE_SIZE,
                False,
            )
            m_i, l_i, acc = _softmax_step(
                q, k, v, None, m_i, l_i, acc, scale_log2, PRECISION, UPCAST_DOT, False
            )
        for n0 in range(full_end, hi, BLOCK_N):  # the diagonal band and the tail, masked
            tokens = n0 + tl.arange(0, BLOCK_N)
            token_mask = tokens < hi
            pages = _token_pages(table_row, tokens, token_mask, PAGE_SIZE, True)
            k = _load_tile(
                K,
                pages,
                tokens,
                token_mask,
                kv_head,
                stride_kp,
                stride_ks,
                stride_kh,
                dims,
                PAGE_SIZE,
                True,
            )
            v = _load_tile(
                V,
                pages,
                tokens,
                token_mask,
                kv_head,
                stride_vp,
                stride_vs,
                stride_vh,
                dims,
                PAGE_SIZE,
                True,
            )
            allowed = (tokens[None, :] <= diagonal + rows[:, None]) & token_mask[None, :]
            m_i, l_i, acc = _softmax_step(
                q, k, v, allowed, m_i, l_i, acc, scale_log2, PRECISION, UPCAST_DOT, True
            )
        result = acc / l_i[:, None]  # 0/0 = NaN for a row with no keys, as in trtllm-gen
        pointers = Out + token_rows[:, None] * stride_or + head * stride_oh + dims[None, :]
        tl.store(pointers, result.to(Out.dtype.element_ty), mask=row_mask[:, None])
