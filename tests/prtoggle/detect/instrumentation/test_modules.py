"""Tests of detect.instrumentation.modules: every submodule's outputs probed by path, first writer
first, rows, steps, no hook left behind, nothing launched while off."""

from __future__ import annotations

import pytest
import torch

from prtoggle import detect
from prtoggle.detect.findings.hits import SiteHit
from prtoggle.detect.probes import site_probes, witness
from prtoggle.errors import DetectUsageError, NaNDetected


class Mlp(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = torch.nn.Linear(width, 2 * width)
        self.act = torch.nn.SiLU()
        self.down = torch.nn.Linear(2 * width, width)
        self.poison_row: int | None = None
        self.fault: torch.Tensor | None = None  # added to the output (device-side faults)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.down(self.act(self.up(x)))
        if self.fault is not None:
            out = out + self.fault[: out.shape[0]]
        if self.poison_row is not None:
            out = out.clone()
            out[self.poison_row, 0] = float("nan")
        return out


class Layer(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.mlp = Mlp(width)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        out = x + self.mlp(self.norm(x))
        return out, {"residual": x}


class Model(torch.nn.Module):
    def __init__(self, width: int = 8, layers: int = 4) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer(width) for _ in range(layers))
        self.head = torch.nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x, _ = layer(x)
        return self.head(x)


def _model() -> Model:
    torch.manual_seed(0)
    return Model()


def _hooks(module: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules())


@pytest.mark.usefixtures("detection_on")
@pytest.mark.parametrize("fuse", [True, False])
def test_the_first_writer_leads_with_its_rows_and_later_sites_follow(fuse: bool) -> None:
    model = _model()
    model.layers[2].mlp.poison_row = 1
    with detect.instrument(model, name="model", fuse=fuse):
        model(torch.randn(3, 8))
    with pytest.raises(NaNDetected) as excinfo:
        detect.check()
    error = excinfo.value
    assert error.first.site == "model.layers.2.mlp"
    assert (error.first.first_row, error.first.last_row) == (1, 1)
    assert error.sites == (
        "model.layers.2.mlp",
        "model.layers.2[0]",
        "model.layers.3.norm",
        "model.layers.3.mlp.up",
        "model.layers.3.mlp.act",
        "model.layers.3.mlp.down",
        "model.layers.3.mlp",
        "model.layers.3[0]",
        "model.layers.3[1][residual]",
        "model.head",
        "model",
    )
    assert [hit.order for hit in error.hits] == list(range(11))
    assert str(error).startswith(
        "11 sites hit, in first-hit order: nan at model.layers.2.mlp: 1 element in row 1, "
        "first hit in phase eager at step 0, lowest flat index 8; nan at model.layers.2[0]: "
    )
    assert detect.requests_hit(error.first, cu_seq_lens=[0, 1, 3]) == (1,)


@pytest.mark.usefixtures("detection_on")
def test_a_fault_in_step_2_only_is_reported_at_step_2() -> None:
    model = _model()
    with detect.instrument(model):
        for step in range(4):
            detect.set_step(step)
            model.layers[1].mlp.poison_row = 0 if step == 2 else None
            model(torch.randn(2, 8))
    with pytest.raises(NaNDetected) as excinfo:
        detect.check()
    first = excinfo.value.first
    assert isinstance(first, SiteHit)
    assert (first.site, first.step, first.count) == ("model.layers.1.mlp", 2, 1)
    assert {hit.step for hit in excinfo.value.hits} == {2}


@pytest.mark.usefixtures("detection_on")
def test_a_clean_model_with_detection_on_raises_nothing_and_registers_every_output() -> None:
    model = _model()
    with detect.instrument(model) as handle:
        model(torch.randn(5, 8))
    detect.check()
    registered = {site for (_, site) in witness.witness_tables().slots}
    layers = {f"model.layers.{i}" for i in range(4)}
    nested = {f"{layer}[0]" for layer in layers} | {f"{layer}[1][residual]" for layer in layers}
    assert registered == (set(handle.sites) - layers - {"model.layers"}) | nested
    assert len(registered) == 1 + 4 * 7 + 1


def test_hooks_are_gone_after_the_block_and_after_remove() -> None:
    model = _model()
    before = _hooks(model)
    with detect.instrument(model):
        assert _hooks(model) == before + 2 * len(list(model.modules()))
    assert _hooks(model) == before
    handle = detect.instrument(model)
    handle.remove()
    handle.remove()
    assert _hooks(model) == before


def test_while_detection_is_off_nothing_is_launched_or_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launches: list[object] = []
    monkeypatch.setattr(site_probes, "record_float_tensors", lambda *a, **k: launches.append(a))
    model = _model()
    model.layers[0].mlp.poison_row = 0
    with detect.instrument(model) as handle:
        model(torch.randn(2, 8))
    assert launches == []
    assert handle.collector.pending == []
    assert witness.witness_tables().slots == {}


@pytest.mark.usefixtures("detection_on")
def test_fused_mode_launches_once_per_layer_and_once_for_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    groups: list[list[str]] = []
    real = site_probes.record_float_tensors

    def spy(named: list[tuple[str, torch.Tensor]], **kwargs: object) -> None:
        groups.append([site for site, _ in named])
        real(named, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(site_probes, "record_float_tensors", spy)
    model = _model()
    with detect.instrument(model):
        model(torch.randn(2, 8))
    assert len(groups) == 5
    assert groups[0][0] == "model.layers.0.norm"
    assert groups[0][-1] == "model.layers.0[1][residual]"
    assert groups[4] == ["model.head", "model"]
    with detect.instrument(model, fuse=False):
        model(torch.randn(2, 8))
    assert len(groups) == 5 + len(list(model.modules())) - 1  # the ModuleList is not called


def test_instrument_refuses_what_is_not_a_module_or_a_name() -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.instrument(lambda x: x)  # type: ignore[arg-type]
    assert str(excinfo.value) == "instrument(): expected a torch.nn.Module, got function"
    with pytest.raises(DetectUsageError) as excinfo:
        detect.instrument(_model(), name=" ")
    assert str(excinfo.value) == "instrument(): name must be a non-empty string, got ' '"


@pytest.mark.usefixtures("detection_on")
def test_inf_outputs_are_probed_when_asked() -> None:
    model = torch.nn.Sequential(torch.nn.Identity())
    with detect.instrument(model, name="m", check_inf=True):
        model(torch.tensor([[1.0, float("inf")]]))
    (hit_0, hit_1) = detect.report().hits
    assert [(hit_0.kind, hit_0.site), (hit_1.kind, hit_1.site)] == [
        ("inf", "m.0"),
        ("inf", "m"),
    ]


# ---------------------------------------------------------------- GPU (run with -m gpu)


@pytest.mark.gpu
@pytest.mark.usefixtures("detection_on")
@pytest.mark.parametrize("fuse", [True, False])
def test_inside_cuda_graph_replay_the_first_writer_its_rows_and_step_are_named(
    fuse: bool,
) -> None:
    device = torch.device("cuda")
    model = _model().to(device=device, dtype=torch.bfloat16)
    fault = torch.zeros(4, 8, device=device, dtype=torch.bfloat16)
    model.layers[2].mlp.fault = fault
    x = torch.randn(3, 8, device=device, dtype=torch.bfloat16)
    detect.prepare_device(device)
    handle = detect.instrument(model, fuse=fuse)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), detect.phase("capture-warmup"):
        for _ in range(2):
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with detect.phase("capture"), torch.cuda.graph(graph):
        model(x)
    handle.remove()
    assert _hooks(model) == 0
    for step in range(4):
        fault[1, 0] = float("nan") if step == 2 else 0.0
        torch.cuda.set_sync_debug_mode("error")  # replays and the clock never sync
        try:
            detect.set_step(step)
            with detect.phase("replay"):
                graph.replay()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    with pytest.raises(NaNDetected) as excinfo:
        detect.check()
    first = excinfo.value.first
    assert (first.site, first.phase, first.step) == ("model.layers.2.mlp", "replay", 2)
    assert (first.first_row, first.last_row, first.count) == (1, 1, 1)
    assert excinfo.value.sites[:3] == (
        "model.layers.2.mlp",
        "model.layers.2[0]",
        "model.layers.3.norm",
    )
    assert excinfo.value.sites[-2:] == ("model.head", "model")
    assert [hit.order for hit in excinfo.value.hits] == list(range(len(excinfo.value.hits)))
    detect.reset()
    fault.zero_()
    with detect.phase("replay"):
        graph.replay()
    detect.check()
