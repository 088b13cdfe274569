"""The faster forms of the hot layers: oneDNN-packed float32, int8, and the pages they free."""

from __future__ import annotations

import copy
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import safetensors.torch
import torch
from torch import nn
from torch.nn import functional as F

from tests.support.reference_model import build_model
from wyoming_pocket_tts.engine.cpu import quantize
from wyoming_pocket_tts.engine.cpu.packed import (
    ROW_STEP,
    PackedConv1d,
    PackedLinear,
    pack_convolutions,
    pack_linears,
    packing_supported,
    padded_rows,
    same_layout,
)
from wyoming_pocket_tts.engine.cpu.quantize import (
    PrepackedLinear,
    half_weights_supported,
    int8_backend,
)
from wyoming_pocket_tts.engine.model import mimi
from wyoming_pocket_tts.engine.model.checkpoint import release_file_pages
from wyoming_pocket_tts.engine.model.flow_lm import FlowHead, TimeEmbedding
from wyoming_pocket_tts.engine.model.kv_cache import WindowKV
from wyoming_pocket_tts.engine.model.layers import Transformer, TransformerLayer
from wyoming_pocket_tts.engine.model.mimi import ELU, DecoderBatch
from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.policy import default_turn_max_jobs
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

needs_packing = pytest.mark.skipif(
    not packing_supported(), reason="oneDNN packing unsupported here"
)
OPTIONS = GenerationOptions(temperature=0.0, max_frames_per_chunk=8)


@needs_packing
@pytest.mark.parametrize("bias", [True, False])
# 11 and 3 x 5 rows are padded to a multiple of 4 inside the layer; the extra rows never show.
@pytest.mark.parametrize("shape", [(1, 96), (5, 96), (2, 3, 96), (11, 96), (3, 5, 96)])
def test_packed_linear_equals_linear(bias, shape):
    linear = nn.Linear(96, 80, bias=bias)
    x = torch.randn(*shape)
    strided = torch.randn(96, *shape[:-1]).movedim(0, -1)  # rows not contiguous
    with torch.inference_mode():
        torch.testing.assert_close(PackedLinear(linear)(x), linear(x), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(
            PackedLinear(linear)(strided), linear(strided), rtol=1e-5, atol=1e-5
        )


@needs_packing
@pytest.mark.parametrize("shape", [(1, 96), (11, 96), (3, 5, 96)])
def test_packed_linear_applies_tanh_gelu_in_the_product(shape):
    linear = nn.Linear(96, 80)
    x = torch.randn(*shape)
    with torch.inference_mode():
        fused = PackedLinear(linear)(x, gelu_tanh=True)
        expected = F.gelu(linear(x), approximate="tanh")
    torch.testing.assert_close(fused, expected, rtol=1e-5, atol=1e-5)


@needs_packing
def test_a_packed_transformer_layer_equals_the_plain_one():
    """Its feed-forward's GELU then runs inside linear1's product."""
    plain = Transformer([TransformerLayer(64, 4, 128, 10_000.0, layer_scale=True)], context=10)
    packed = copy.deepcopy(plain)
    pack_linears(packed)
    assert isinstance(packed.layers[0].linear1, PackedLinear)
    x = torch.randn(2, 5, 64)
    with torch.inference_mode():
        outputs = [stack(x, WindowKV(1, 4, 16, 10, 2)) for stack in (plain, packed)]
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)


@needs_packing
def test_pack_linears_swaps_every_linear_and_returns_their_weights():
    module = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 4, bias=False)))
    weights = [module[0].weight, module[2][0].weight]
    replaced = pack_linears(module)
    assert [id(w) for w in replaced] == [id(w) for w in weights]
    assert not any(type(m) is nn.Linear for m in module.modules())
    assert sum(type(m) is PackedLinear for m in module.modules()) == 2


def channels_last(x: torch.Tensor) -> torch.Tensor:
    """The same [B, C, T] values, laid out as [B, T, C] in memory."""
    return x.transpose(1, 2).contiguous().transpose(1, 2)


@needs_packing
@pytest.mark.parametrize("layout", [torch.Tensor.contiguous, channels_last])
@pytest.mark.parametrize("make", [
    lambda: nn.Conv1d(24, 16, 7),
    lambda: nn.Conv1d(16, 8, 3, dilation=2, bias=False),
    lambda: nn.Conv1d(16, 32, 4, stride=2),
    lambda: nn.Conv1d(16, 1, 3),
    lambda: nn.ConvTranspose1d(24, 16, 8, stride=4),
    lambda: nn.ConvTranspose1d(16, 16, 6, stride=3, groups=16, bias=False),
])
def test_packed_convolution_equals_torch_and_answers_channels_last(make, layout):
    conv = make()
    x = layout(torch.randn(2, conv.in_channels, 13))
    with torch.inference_mode():
        packed = PackedConv1d(conv)
        torch.testing.assert_close(packed(x), conv(x), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(packed(x[:1]), conv(x[:1]), rtol=1e-5, atol=1e-5)
        assert conv.out_channels == 1 or packed(x).stride(1) == 1


@needs_packing
@pytest.mark.parametrize("make", [
    lambda: nn.Conv1d(64, 64, 7),
    lambda: nn.ConvTranspose1d(64, 32, 12, stride=6),
    lambda: nn.ConvTranspose1d(16, 16, 6, stride=3, groups=16, bias=False),
])
def test_packed_convolution_lays_its_weight_out_for_each_input_shape(make):
    """oneDNN re-lays a weight in another layout on every call (100 ms on AVX2 for some
    shapes): each shape must get the layout oneDNN asks for it, kept once however
    many shapes share it, and no layout that no shape uses may stay in memory."""
    conv = make()
    packed = PackedConv1d(conv)
    shapes = [(1, 9), (1, 23), (3, 9), (2, 41), (1, 23), (4, 54)]
    with torch.inference_mode():
        for batch, length in shapes:
            x = channels_last(torch.randn(batch, conv.in_channels, length))
            torch.testing.assert_close(packed(x), conv(x), rtol=1e-5, atol=1e-5)
    used = packed._by_shape
    assert {shape[0] for shape in used} == {1, 2, 3, 4} and len(used) == 5
    for shape, weight in used.items():
        assert same_layout(weight, packed._laid_out(packed._plain_weight(), shape))
        assert any(weight is kept for kept in packed._layouts)
    kept = packed._layouts
    assert len({id(w) for w in kept}) == len(kept) <= len(used)
    assert {id(w) for w in kept} == {id(w) for w in used.values()}
    assert not any(same_layout(a, b) for i, a in enumerate(kept) for b in kept[i + 1 :])


def test_padded_convolutions_are_not_packed():
    with pytest.raises(ValueError, match="unpadded"):
        PackedConv1d(nn.Conv1d(8, 8, 3, padding=1))


@needs_packing
def test_pack_convolutions_swaps_every_convolution_and_returns_their_weights():
    module = nn.Sequential(
        nn.Conv1d(4, 4, 3), nn.ELU(), nn.Sequential(nn.ConvTranspose1d(4, 2, 4, 2))
    )
    weights = [module[0].weight, module[2][0].weight]
    replaced = pack_convolutions(module)
    assert [id(w) for w in replaced] == [id(w) for w in weights]
    assert sum(type(m) is PackedConv1d for m in module.modules()) == 2


@needs_packing
def test_loaded_model_uses_packed_layers(model):
    def kinds(module: nn.Module, *types: type) -> set[type]:
        return {type(m) for m in module.modules() if isinstance(m, types)}

    linears = (nn.Linear, PackedLinear)
    assert kinds(model.flow_lm.transformer, *linears) == {PackedLinear}
    assert kinds(model.mimi.decoder_transformer, *linears) == {PackedLinear}
    assert kinds(model.flow_lm.flow_net, *linears) == {PackedLinear}
    assert model.flow_lm.flow_net.fused_modulation is not None
    convolutions = (nn.Conv1d, nn.ConvTranspose1d, PackedConv1d)
    for part in (model.mimi.quantizer, model.mimi.upsample, model.mimi.decoder):
        assert kinds(part, *convolutions) == {PackedConv1d}
    # Only voice cloning uses the encoder: it keeps the file's pages, let go after each voice.
    assert kinds(model.mimi.encoder, *convolutions) == {nn.Conv1d}


@needs_packing
def test_decoder_activations_stay_channels_last_between_packed_convolutions(model):
    """A layer given channels-first input converts it, at a cost on every call."""
    mimi = model.mimi
    inputs = []
    for module in mimi.modules():
        if isinstance(module, PackedConv1d):
            module.register_forward_pre_hook(lambda module, args: inputs.append(args[0]))
    stream = mimi.new_decoder_state()
    streams = DecoderBatch([mimi.new_decoder_state(), mimi.new_decoder_state()])
    width = mimi.config.quantizer.dimension
    with torch.inference_mode():
        for frames in (1, 2):  # a first call (no history yet) and a later one
            mimi.decode(torch.randn(1, frames, width), stream)
            mimi.decode(torch.randn(2, frames, width), streams)
    assert len(inputs) == 4 * sum(isinstance(m, PackedConv1d) for m in mimi.modules())
    wide = [x for x in inputs if x.shape[1] > 1]
    assert [x.stride(1) for x in wide] == [1] * len(wide)


def test_released_checkpoint_pages_read_back_unchanged(tmp_path):
    path = tmp_path / "weights.safetensors"
    original = torch.randn(256, 1024)  # 1 MiB: whole pages inside it
    safetensors.torch.save_file({"w": original}, str(path))
    with safetensors.safe_open(str(path), framework="pt") as handle:
        mapped = handle.get_tensor("w")
    assert float(mapped.sum()) == pytest.approx(float(original.sum()))  # make it resident
    anonymous = original.clone()
    assert release_file_pages([anonymous], path) == 0  # never memory that is not the file's
    released = release_file_pages([mapped], path)
    if released == 0:
        pytest.skip("this safetensors build copies tensors instead of mapping the file")
    assert released >= 1024 * 1024 - 2 * 4096
    torch.testing.assert_close(mapped, original, rtol=0, atol=0)
    torch.testing.assert_close(anonymous, original, rtol=0, atol=0)


needs_int8 = pytest.mark.skipif(
    int8_backend() is None, reason="no int8 engine in this PyTorch build"
)


@needs_int8
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")  # torch.ao's
@pytest.mark.parametrize(("engine", "dtype"), [
    ("fbgemm", torch.qint8), ("fbgemm", torch.float16), ("qnnpack", torch.qint8),  # x86, ARM
])
@pytest.mark.parametrize("shape", [(1, 48), (4, 48), (2, 3, 48)])
@pytest.mark.parametrize("signs", [torch.sign, torch.ones_like, lambda w: -torch.ones_like(w)])
def test_prepacked_linear_equals_torch_ao_dynamic_linear(monkeypatch, engine, dtype, shape, signs):
    """Our layer packs the same weights and calls the same product as torch.ao's (whose
    activations have 7 bits: see the next test for 8), whatever the weights' signs."""
    if engine not in torch.backends.quantized.supported_engines:
        pytest.skip(f"no {engine} engine in this PyTorch build")
    monkeypatch.setattr(torch.backends.quantized, "engine", engine)
    monkeypatch.setattr(quantize, "full_range_activations_exact", lambda engine: False)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(48, 40), nn.ReLU(), nn.Linear(40, 24, bias=False))
    with torch.no_grad():
        for layer in model[::2]:
            layer.weight.copy_(layer.weight.abs() * signs(layer.weight))
    expected_model = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=dtype)
    replaced = quantize._swap_for_dynamic_linears(model, dtype)
    assert len(replaced) == 2
    assert [type(m) for m in model] == [PrepackedLinear, nn.ReLU, PrepackedLinear]
    assert {m.weight_dtype for m in model[::2]} == {dtype}
    x = torch.randn(*shape)
    with torch.inference_mode():
        torch.testing.assert_close(model(x), expected_model(x), rtol=0, atol=0)


def _relative_error(approximate: torch.Tensor, exact: torch.Tensor) -> float:
    return float((approximate - exact).norm() / exact.norm())


@needs_int8
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")  # torch.ao's
def test_int8_activations_have_8_bits_where_the_products_are_exact(monkeypatch):
    """Where this CPU's int8 products cannot saturate, activations get all 8 bits, and
    the layer comes closer to float32 than torch.ao's 7 bits; elsewhere it keeps 7."""
    engine = int8_backend()
    monkeypatch.setattr(torch.backends.quantized, "engine", engine)
    exact = quantize.full_range_activations_exact(engine)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 64))
    x = torch.randn(3, 256)
    with torch.inference_mode():
        float32 = model(x)
        quantize._swap_for_dynamic_linears(model, torch.qint8)
        layer = model[0]
        ours = layer(x)
        seven_bits = torch.ops.quantized.linear_dynamic(x, layer.packed, reduce_range=True)
        eight_bits = torch.ops.quantized.linear_dynamic(x, layer.packed, reduce_range=False)
    torch.testing.assert_close(ours, eight_bits if exact else seven_bits, rtol=0, atol=0)
    if exact and engine != "qnnpack":  # qnnpack has 8 bits either way
        assert _relative_error(ours, float32) < 0.7 * _relative_error(seven_bits, float32)


@needs_int8
@pytest.mark.filterwarnings("ignore::UserWarning")  # quantized tensors' deprecation
def test_saturating_int8_products_keep_7_bit_activations(monkeypatch):
    """A CPU without VNNI sums pairs of 8-bit products in 16 bits: the worst case then
    comes out about half what it should, and the check must say so."""
    product = torch.ops.quantized.linear_dynamic

    def saturating(x, packed, reduce_range):
        y = product(x, packed, reduce_range=reduce_range)
        return y if reduce_range else y.clamp(max=32767 * x.shape[-1] / 2 / (255 * 127))

    monkeypatch.setattr(torch.ops.quantized, "linear_dynamic", saturating)
    assert not quantize.full_range_activations_exact.__wrapped__(int8_backend())


@needs_int8
def test_quantized_model_is_close_to_float32_but_not_equal(tiny_model, voice):
    quantized = PocketTTS.load(tiny_model.config_path, quantize=True)
    float32 = PocketTTS.load(tiny_model.config_path)
    transformer = list(quantized.flow_lm.transformer.modules())
    int8 = [m for m in transformer if type(m) is PrepackedLinear and m.weight_dtype == torch.qint8]
    assert int8 and not any(type(m) in (nn.Linear, PackedLinear) for m in transformer)
    assert quantized.quantized and not float32.quantized
    # int8 FlowLM gains less from a second core: the stages take turns for fewer jobs.
    assert SynthesisWorker(Synthesizer(quantized)).turn_max_jobs == default_turn_max_jobs(True)
    assert SynthesisWorker(Synthesizer(float32)).turn_max_jobs == default_turn_max_jobs(False)
    assert default_turn_max_jobs(True) < default_turn_max_jobs(False)

    def speak(model) -> np.ndarray:
        return np.concatenate(list(Synthesizer(model).stream(voice, "Turn on the light.", OPTIONS)))

    exact, approximate = speak(float32), speak(quantized)
    assert exact.shape == approximate.shape
    error = np.linalg.norm(approximate - exact) / np.linalg.norm(exact)
    assert 0 < error < 0.5


needs_half_weights = pytest.mark.skipif(
    int8_backend() is None or not half_weights_supported(),
    reason="no float16-weight linear layers in this PyTorch build",
)


def _head_latents(model: PocketTTS, seed: int = 0) -> torch.Tensor:
    """The flow head's latents for fixed transformer outputs and noise."""
    generator = torch.Generator().manual_seed(seed)
    head_input = model.flow_lm.out_eos.in_features
    z = torch.randn(3, head_input, generator=generator)
    noise = torch.randn(3, model.flow_lm.latent_dim, generator=generator)
    with torch.inference_mode():
        return model.flow_lm.sample(z, noise)


@needs_half_weights
def test_quantized_model_has_a_float16_flow_head(tiny_model):
    """Beside the int8 transformer, the flow head's weights are float16: its latents stay
    within float16's rounding of float32's, far closer than int8 would be."""
    quantized = PocketTTS.load(tiny_model.config_path, quantize=True)
    float32 = PocketTTS.load(tiny_model.config_path)
    head = list(quantized.flow_lm.flow_net.modules())
    dynamic = [module for module in head if type(module) is PrepackedLinear]
    assert dynamic and {layer.weight_dtype for layer in dynamic} == {torch.float16}
    assert not any(type(module) in (nn.Linear, PackedLinear) for module in head)
    exact, approximate = _head_latents(float32), _head_latents(quantized)
    error = _relative_error(approximate, exact)
    assert 0 < error < 2e-3


def test_float16_holds_bfloat16_weights_and_nothing_rounder():
    """bfloat16's values (Kyutai's checkpoints) fit float16 exactly; a float32 weight's
    do not, nor values beyond float16's range; below its range, within half a step."""
    weights = torch.randn(64, 64) * 0.05
    assert quantize.float16_holds(weights.bfloat16().float())
    assert not quantize.float16_holds(weights)
    assert quantize.float16_holds(torch.tensor([1e-9, 2.0**-20, -(2.0**-17), 65504.0]))
    for outside in (1e5, float("inf"), float("nan")):
        assert not quantize.float16_holds(torch.tensor([0.5, outside]))


@needs_half_weights
@pytest.mark.parametrize("rows", [1, 4, 48])
def test_float16_layers_compute_bfloat16_weights_as_float32_does(rows):
    """With weights float16 holds, a float16-weight layer computes in float32: its
    outputs differ from float64's by float32's rounding, as a float32 layer's do, and
    by far less than float16 rounding a float32 weight would move them."""
    linear = nn.Linear(1024, 512)
    x = torch.randn(rows, 1024)

    def error_of(weight: torch.Tensor) -> float:
        with torch.no_grad():
            linear.weight.copy_(weight)
        exact = F.linear(x.double(), linear.weight.double(), linear.bias.double())
        with torch.inference_mode():
            return _relative_error(PrepackedLinear(linear, torch.float16)(x).double(), exact)

    weight = torch.randn(512, 1024) * 0.03
    assert error_of(weight.bfloat16().float()) < 1e-5
    assert error_of(weight) > 1e-4  # rounded by float16: the test can tell


@needs_half_weights
def test_bfloat16_checkpoint_puts_float16_weights_in_flow_lm_only(models_dir, tokenizer_dir):
    """Every FlowLM linear layer of a bfloat16 checkpoint is held in float16; Mimi stays
    float32. A float32 checkpoint's FlowLM stays float32 (see test_parity.py for audio)."""
    built = build_model(
        models_dir / "tiny-bfloat16", tiny=True, tokenizer_dir=tokenizer_dir,
        weights_dtype=torch.bfloat16,
    )
    model = PocketTTS.load(built.config_path)
    flow_lm = model.flow_lm
    hot = [*flow_lm.transformer.layers.modules(), *flow_lm.flow_net.modules()]
    halves = [m for m in hot if type(m) is PrepackedLinear]
    assert halves and {layer.weight_dtype for layer in halves} == {torch.float16}
    assert not any(type(m) in (nn.Linear, PackedLinear) for m in hot)
    # Everything else computes in float32, cast from the file's bfloat16, but the voice
    # encoder, which keeps the file's bfloat16 between voices, and the text's table.
    encoder = model.mimi.voice_encoder_parts()
    kept = {id(t) for part in encoder for t in part.parameters()}
    assert model.flow_lm.conditioner.embed.weight.dtype == torch.bfloat16  # rows cast as read
    kept.add(id(model.flow_lm.conditioner.embed.weight))
    tensors = [*model.flow_lm.parameters(), *model.mimi.parameters(), *model.mimi.buffers()]
    assert {t.dtype for t in tensors if id(t) not in kept} == {torch.float32}
    model.voice_from_samples(np.random.default_rng(0).standard_normal(24000) * 0.1, 24000)
    assert {t.dtype for part in encoder for t in part.parameters()} == {torch.bfloat16}


def test_bfloat16_checkpoint_without_float16_weights_runs_in_float32(
    models_dir, tokenizer_dir, monkeypatch
):
    """Where the engine has no float16-weight layers (ARM), a bfloat16 checkpoint is cast
    to float32 whole, with the float16 model's latents to float rounding."""
    built = build_model(
        models_dir / "tiny-bfloat16", tiny=True, tokenizer_dir=tokenizer_dir,
        weights_dtype=torch.bfloat16,
    )
    halved = PocketTTS.load(built.config_path)
    monkeypatch.setattr(quantize, "half_weights_supported", lambda: False)
    float32 = PocketTTS.load(built.config_path)
    assert not any(type(m) is PrepackedLinear for m in float32.flow_lm.modules())
    table = float32.flow_lm.conditioner.embed.weight  # rows cast as they are read
    assert {t.dtype for t in float32.flow_lm.parameters() if t is not table} == {torch.float32}
    torch.testing.assert_close(_head_latents(float32), _head_latents(halved), rtol=1e-5, atol=1e-6)


def test_float32_checkpoint_keeps_float32_flow_lm(tiny_model):
    flow_lm = PocketTTS.load(tiny_model.config_path).flow_lm
    assert not any(type(m) is PrepackedLinear for m in flow_lm.modules())


def test_flow_head_stays_float32_without_float16_weights(tiny_model, monkeypatch):
    """Where the engine has no float16-weight layers (qnnpack, on ARM), an int8 model
    keeps its flow head in float32, with the same latents as the float32 model's."""
    monkeypatch.setattr(quantize, "half_weights_supported", lambda: False)
    quantized = PocketTTS.load(tiny_model.config_path, quantize=True)
    float32 = PocketTTS.load(tiny_model.config_path)
    assert not any(type(m) is PrepackedLinear for m in quantized.flow_lm.flow_net.modules())
    torch.testing.assert_close(_head_latents(quantized), _head_latents(float32), rtol=0, atol=0)


@pytest.mark.skipif(
    "qnnpack" not in torch.backends.quantized.supported_engines, reason="no qnnpack engine here"
)
def test_float16_weights_are_reported_unsupported_by_qnnpack(monkeypatch, caplog):
    monkeypatch.setattr(torch.backends.quantized, "engine", "qnnpack")
    with caplog.at_level("INFO", logger=quantize.__name__):
        assert not quantize.half_weights_supported.__wrapped__()
    assert "weights stay float32" in caplog.text


def test_text_prompts_of_any_length_meet_few_matrix_shapes():
    """Up to 64 rows (a 50-token prompt, a 64-position voice piece) in 22 shapes, one per
    batch size of 1-8 streams and 14 for longer inputs, each at most 3 rows too many."""
    assert [padded_rows(rows) for rows in range(1, 9)] == list(range(1, 9))
    assert len({padded_rows(rows) for rows in range(1, 65)}) == 22
    assert all(0 <= padded_rows(rows) - rows < ROW_STEP for rows in range(1, 600))
    assert all(padded_rows(16 * frames) == 16 * frames for frames in range(1, 33))  # Mimi


ROW_COUNTS_PROGRAM = """
from wyoming_pocket_tts.engine.cpu.process import prepare_process
prepare_process(quantized=False)  # as a server's process is set up
import torch
from torch import nn
from wyoming_pocket_tts.engine.cpu.packed import EXACT_ROWS, ROW_STEP, PackedLinear

def resident_mb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024

layer = PackedLinear(nn.Linear(8, 8))
with torch.inference_mode():
    for shape in range(1, 601):  # each a row count oneDNN has not met before
        layer(torch.randn(EXACT_ROWS + shape * ROW_STEP, 8))
        if shape == 300:
            halfway = resident_mb()
print(resident_mb() - halfway)
"""


@needs_packing
def test_kernels_compiled_for_new_row_counts_stay_bounded():
    """Every text length is a new matrix shape for oneDNN, which compiles and keeps a
    kernel for it (about 0.6 MB): unbounded, 300 more shapes would take ~180 MB."""
    environment = {k: v for k, v in os.environ.items() if not k.endswith("CACHE_CAPACITY")}
    done = subprocess.run(
        [sys.executable, "-c", ROW_COUNTS_PROGRAM], capture_output=True, text=True, check=True,
        env=environment,
    )
    assert float(done.stdout) < 40


def random_head(depth: int) -> FlowHead:
    """A small flow head with random weights; its time frequencies, which the model
    leaves for the checkpoint to fill, set as the checkpoints have them."""
    head = FlowHead(latent_dim=8, dim=32, depth=depth, cond_dim=48, time_conditions=2).eval()
    for embed in head.time_embed:
        assert isinstance(embed, TimeEmbedding)
        half = embed.freqs.numel()
        embed.freqs.copy_(torch.exp(-math.log(10_000) * torch.arange(half) / half))
    return head


def test_fused_modulations_give_the_same_latents_from_one_product():
    torch.manual_seed(0)
    head = random_head(depth=3)
    condition, noise = torch.randn(3, 48), torch.randn(3, 8)
    with torch.inference_mode():
        separate = head(condition, noise, (0.0, 1.0))
        replaced = head.fuse_modulations()
        fused = head(condition, noise, (0.0, 1.0))
    assert len(replaced) == 2 * 4  # weight and bias of three blocks and the final layer
    layers = (*head.res_blocks, head.final_layer)
    assert not any(hasattr(layer, "adaLN_modulation") for layer in layers)
    torch.testing.assert_close(fused, separate, rtol=1e-5, atol=1e-6)


def test_flow_time_embeddings_are_computed_once_per_set_of_times():
    head = random_head(depth=1)
    calls = []
    for embed in head.time_embed:
        embed.register_forward_hook(lambda module, args, output: calls.append(module))
    condition, noise = torch.randn(2, 48), torch.randn(2, 8)
    with torch.inference_mode():
        first = head(condition, noise, (0.0, 1.0))
        again = head(condition, noise, (0.0, 1.0))
        other = head(condition, noise, (0.5, 1.0))
    assert len(calls) == 2 * 2  # each embedding once for (0, 1), once for (0.5, 1)
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    assert not torch.allclose(other, first)
    # The kept embedding is an ordinary tensor: usable outside inference mode too.
    with torch.no_grad():
        torch.testing.assert_close(head(condition, noise, (0.0, 1.0)), first, rtol=0, atol=0)


def test_mimi_elu_equals_torch_elu_including_extremes():
    x = torch.cat([
        torch.linspace(-30, 30, 10_001),
        torch.tensor([0.0, -0.0, 1e-8, -1e-8, -1e4, 1e4, float("inf"), float("-inf")]),
    ]).view(1, 1, -1)
    with torch.inference_mode():
        from_exp, torch_kernel = ELU(from_exp=True)(x), ELU(from_exp=False)(x)
    torch.testing.assert_close(from_exp, F.elu(x), rtol=0, atol=2e-7)
    assert from_exp.isnan().sum() == 0
    torch.testing.assert_close(torch_kernel, F.elu(x), rtol=0, atol=0)


@pytest.mark.parametrize("from_exp", [False, True], ids=["torch-kernel", "exp-form"])
def test_mimi_elu_in_place_gives_the_same_values_in_its_input(from_exp):
    x = torch.linspace(-8, 8, 4001).view(1, 1, -1)
    expected = ELU(from_exp=from_exp)(x.clone())
    overwritten = x.clone()
    result = ELU(from_exp=from_exp, inplace=True)(overwritten)
    assert result.data_ptr() == overwritten.data_ptr()
    torch.testing.assert_close(overwritten, expected, rtol=0, atol=0)


def test_mimi_residual_unit_leaves_its_input_alone():
    """Its first ELU must not overwrite x, which the residual sum adds back."""
    unit = mimi.ResidualUnit(8, 3, 1, 2, "constant")
    x = torch.randn(2, 8, 10)
    kept = x.clone()
    with torch.inference_mode():
        y = unit(x)
    torch.testing.assert_close(x, kept, rtol=0, atol=0)
    assert not torch.equal(y, x)


@pytest.mark.parametrize(
    ("capability", "from_exp"), [("AVX512", False), ("AVX2", True), ("DEFAULT", True)]
)
def test_mimi_elu_takes_torch_kernel_only_with_avx512(monkeypatch, capability, from_exp):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.setattr(mimi, "_exp_form_preferred", mimi._exp_form_preferred.__wrapped__)
    assert ELU().from_exp is from_exp


@needs_int8
def test_an_engine_whose_int8_products_fail_is_not_used(monkeypatch, caplog):
    """A build can list a quantized engine whose operators then fail: --quantize must
    fall back to float32 with a log line, not stop the server."""

    def broken(*args, **kwargs):
        raise RuntimeError("no such kernel")

    monkeypatch.setattr(torch.ops.quantized, "linear_prepack", broken)
    with caplog.at_level("INFO", logger=quantize.__name__):
        assert quantize.int8_backend.__wrapped__() is None
    assert "int8 quantization is not supported" in caplog.text
    assert "no such kernel" in caplog.text


def test_without_int8_products_a_quantized_load_is_float32(tiny_model, voice, monkeypatch):
    monkeypatch.setattr(quantize, "int8_backend", lambda: None)
    model = PocketTTS.load(tiny_model.config_path, quantize=True)
    assert not model.quantized
    assert not any(type(m) is PrepackedLinear for m in model.flow_lm.modules())
    float32 = PocketTTS.load(tiny_model.config_path)
    options = GenerationOptions(temperature=0.0, max_frames_per_chunk=4)
    fallback, exact = (
        np.concatenate(list(Synthesizer(m).stream(voice, "Hello there.", options)))
        for m in (model, float32)
    )
    np.testing.assert_array_equal(fallback, exact)
