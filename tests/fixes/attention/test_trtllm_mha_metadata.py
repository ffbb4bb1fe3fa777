"""Metadata probes of the TRT-LLM MHA backend: what they report, and that off costs nothing."""

from __future__ import annotations

import pytest
import torch

from fixes.attention import trtllm_mha_metadata
from fixes.attention.trtllm_mha_metadata import ForwardMetadata
from prtoggle import detect
from prtoggle.errors import OOBDetected


def _metadata(cache_seq_lens: list[int]) -> ForwardMetadata:
    lens = torch.tensor(cache_seq_lens, dtype=torch.int32)
    cu = torch.cat([torch.zeros(1, dtype=torch.int32), lens.cumsum(0).to(torch.int32)])
    return ForwardMetadata(
        cache_seq_lens=lens,
        cu_seq_lens_q=torch.arange(len(cache_seq_lens) + 1, dtype=torch.int32),
        cu_seq_lens_k=cu,
        page_table=torch.arange(2 * len(cache_seq_lens), dtype=torch.int32).view(-1, 2),
        max_seq_len_q=1,
        max_seq_len_k=max(cache_seq_lens),
    )


@pytest.fixture(autouse=True)
def _fresh_table() -> None:
    detect.reset()


def test_probes_off_launch_no_torch_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SGLANG_SPEC_OOB_DETECTION", raising=False)

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("ForwardMetadata.probe did tensor work with OOB detection off")

    monkeypatch.setattr(trtllm_mha_metadata.torch, "diff", forbidden)
    _metadata([0, 3]).probe(site="t", min_kv_len=1, max_context_len=8, num_pages=8, page_size=4)


def test_an_empty_kv_range_is_reported_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_SPEC_OOB_DETECTION", "1")
    _metadata([0, 3]).probe(site="t", min_kv_len=1, max_context_len=8, num_pages=8, page_size=4)
    with pytest.raises(OOBDetected) as caught:
        detect.check()
    assert caught.value.sites == ("t.cache_seq_lens",)
    assert str(caught.value).startswith(
        "1 site hit: oob at t.cache_seq_lens: 1 element in row 0, value 0 outside [1, 9)"
    )
