"""Torch reference of the TRT-LLM FMHA paged decode and context kernels (the ground truth).

Loops over requests on the host (reads lengths with `int()`): exact and strict, but it
synchronises with the device, so it cannot run inside CUDA graph capture.
"""

from __future__ import annotations

import torch

from fixes.kernels.trtllm_fmha_contract import ContextArgs, DecodeArgs, PagedAttentionArgs
from prtoggle import detect

__all__ = ["context_reference", "decode_reference"]


def decode_reference(args: DecodeArgs) -> torch.Tensor:
    """Paged decode over `bs = seq_lens.shape[0]` requests of `q_len_per_req` rows each.

    Request b reads query rows `b*q_len_per_req + i` and writes the same rows of `out`,
    with no check against the tensors' lengths: a row past a tensor's end is read or
    written inside its allocation as the GPU kernel would (e.g. a redzone), and raises
    IndexError outside it, where the GPU kernel would fault. Query i attends keys
    `[0, seq_lens[b] - q_len_per_req + i]`; an empty range gives NaN (0/0), unguarded.
    `max_seq_len` is unused here (the GPU kernels size their work splitting with it).
    """
    q_len_per_req = args.q_len_per_req
    for b in range(args.seq_lens.shape[0]):
        rows = [b * q_len_per_req + i for i in range(q_len_per_req)]
        _attend_rows(args, request=b, rows=rows, kv_len=int(args.seq_lens[b]), what="decode")
    return args.out


def context_reference(args: ContextArgs) -> torch.Tensor:
    """Paged causal context attention over requests `b < batch_size`, unchecked.

    Reads `cum_seq_lens_q[b]`, `cum_seq_lens_q[b+1]`, `seq_lens[b]` and `block_tables[b]`
    as the GPU kernel does: past a tensor's end inside its allocation it reads what lies
    there; outside the allocation it raises IndexError where the GPU kernel would fault
    (so does a page index outside the KV pool). Query i of request b attends keys
    `[0, seq_lens[b] - q_len_b + i]`; only the first `max_q_len` rows of a request are
    computed (the kernel's grid is sized by `max_q_len`). An empty key range gives NaN.
    `max_kv_len` is unused here.
    """
    for b in range(args.batch_size):
        q_start = int(_row(args.cum_seq_lens_q, b, "cum_seq_lens_q", "context"))
        q_end = int(_row(args.cum_seq_lens_q, b + 1, "cum_seq_lens_q", "context"))
        kv_len = int(_row(args.seq_lens, b, "seq_lens", "context"))
        rows = [q_start + i for i in range(min(q_end - q_start, args.max_q_len))]
        if not rows:
            continue
        _attend_rows(
            args, request=b, rows=rows, kv_len=kv_len, what="context", q_len=q_end - q_start
        )
    return args.out


def _attend_rows(
    args: PagedAttentionArgs,
    *,
    request: int,
    rows: list[int],
    kv_len: int,
    what: str,
    q_len: int | None = None,
) -> None:
    """Causal attention of consecutive query rows of one request over its paged keys."""
    q_len = len(rows) if q_len is None else q_len
    num_keys = max(kv_len, 0)
    keys, values = _gather_request_kv(
        k_cache=args.k_cache,
        v_cache=args.v_cache,
        block_tables=args.block_tables,
        request=request,
        num_keys=num_keys,
        what=what,
    )
    q = torch.stack([_row(args.query, r, "query", what) for r in rows]).float()
    group = q.shape[1] // keys.shape[1]
    keys = keys.float().repeat_interleave(group, dim=1)  # [n, Hq, D]
    values = values.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, keys) * args.softmax_scale  # [Hq, rows, n]
    device = scores.device
    last_key = kv_len - q_len + torch.arange(len(rows), device=device)  # inclusive, per row
    allowed = torch.arange(num_keys, device=device)[None, :] <= last_key[:, None]  # [rows, n]
    scores = scores.masked_fill(~allowed[None], float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True) if num_keys else torch.zeros(1, device=device)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    weights = torch.exp(scores - row_max)
    numer = torch.einsum("hqk,khd->qhd", weights, values)
    denom = weights.sum(dim=-1).transpose(0, 1)[..., None]  # [rows, Hq, 1]
    result = (numer / denom).to(args.out.dtype)  # 0/0 = NaN for an empty key range, unguarded
    for position, r in enumerate(rows):
        _row(args.out, r, "out", what, reading=False).copy_(result[position])


def _gather_request_kv(
    *,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    request: int,
    num_keys: int,
    what: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values [num_keys, Hkv, D] of one request, gathered page by page."""
    page_size = k_cache.shape[1]
    table_row = _row(block_tables, request, "block_tables", what)
    num_pages = -(-num_keys // page_size)
    if num_pages > table_row.shape[0]:
        raise IndexError(
            f"trtllm {what}: request {request} needs {num_pages} pages but block_tables "
            f"has {table_row.shape[0]} columns"
        )
    pages = table_row[:num_pages].long()
    bad = (pages < 0) | (pages >= k_cache.shape[0])
    if bool(bad.any()):
        page = int(pages[bad][0])
        raise IndexError(
            f"trtllm {what}: request {request} page index {page} is out of bounds for a "
            f"KV pool of {k_cache.shape[0]} pages"
        )
    tail = k_cache.shape[2:]
    keys = k_cache[pages].reshape(-1, *tail)[:num_keys]
    values = v_cache[pages].reshape(-1, *tail)[:num_keys]
    return keys, values


def _row(
    tensor: torch.Tensor, index: int, name: str, what: str, *, reading: bool = True
) -> torch.Tensor:
    """`tensor[index]` as a view, addressed as a kernel does (storage offset plus index
    times stride): past the tensor's end but inside its allocation it is whatever the
    allocation holds there (a redzone); outside the allocation it raises IndexError, where
    the GPU kernel would fault. A row read past the end goes through detect.check_read
    (RedzoneRead when it lies in a guarded buffer's redzone: a memory checker's load
    check, which the GPU kernel does not have)."""
    if 0 <= index < tensor.shape[0]:
        return tensor[index]
    offset = tensor.storage_offset() + index * tensor.stride(0)
    inner = zip(tensor.shape[1:], tensor.stride()[1:], strict=True)
    last = offset + sum((size - 1) * step for size, step in inner)
    elements = tensor.untyped_storage().nbytes() // tensor.element_size()
    if index < 0 or not 0 <= offset <= last < elements:
        raise IndexError(
            f"trtllm {what}: index {index} is out of bounds for {name} with "
            f"{tensor.shape[0]} rows (the GPU kernel would access memory out of bounds)"
        )
    row = tensor.new_empty(0).set_(
        tensor.untyped_storage(), offset, tensor.shape[1:], tensor.stride()[1:]
    )
    if reading:
        detect.check_read(row, reader=f"trtllm {what} kernel: {name}[{index}]")
    return row
