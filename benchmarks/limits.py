"""How far from the machine's limits: what a frame must read and compute, and what it costs anyway.

The README's limit note, measured in one run instead of estimated. For a
real-size random-weight model it prints:

* the machine: memory read bandwidth (a plain sum over 400 MB) on one core and on
  all, and the float32 matrix-product rate on all cores;
* a frame as served (the paragraph, ms of wall time per 80 ms frame), ours and the
  reference's, and the same for a *thin* model: every layer, head and flow block
  of the real one at tiny widths, so that it makes the same operator calls for
  almost no arithmetic. Its frame is what a frame costs whatever the model's size:
  the interpreter, operator dispatch, per-call library overhead;
* ours, stage by stage on all cores (each the best of three rounds): a FlowLM step
  (float32 and int8) against its floor, the weights it reads at the measured
  bandwidth plus the thin model's step; a Mimi frame (eight per call) against the
  arithmetic it does at the measured product rate plus the thin model's frame;
* four concurrent streams as the worker runs them side by side (each stage on half
  the cores): a FlowLM step of the four and a Mimi frame, each alone and with the
  other stage running beside it, and from them the most four streams can gain over
  one stream as served.

Each engine runs in a child process of its own (the reference sets torch to one
thread when imported). Usage: python benchmarks/limits.py [--model NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from wyoming_pocket_tts.engine.cpu.process import prepare_process

# Every process of this script is set up as the server is, before the imports below load
# torch. One process measures float32 and int8 alike, so its heaps stay glibc's default,
# which is int8's choice.
prepare_process(quantized=True)

from benchmarks.checkpoints import add_checkpoint_arguments, build_checkpoint, checkpoint_directory
from benchmarks.engine import PARAGRAPH, _machine, run_child
from tests.support.reference_model import FRAME_SAMPLES
from tests.support.voices_audio import write_voice_wav
from wyoming_pocket_tts.engine.runtime.policy import TURN_RUN_FRAMES

STEPS = 40  # FlowLM steps timed per round (median), after a few untimed
MIMI_FRAMES_PER_CALL = TURN_RUN_FRAMES  # as when the stages take turns (float32)
MIMI_CALLS = 6  # per round (median)
STREAMS = 4  # concurrent streams, as in benchmarks/engine.py
# A stage's figure is its best round: a floor is compared with the least disturbed
# measurement (the machine's slow spells last minutes and raise a median by 20-40%).
ROUNDS = 3


def _packed_linear_flops(x_shape, w_shape, *args, out_shape=None, **kwargs) -> int:
    """Each input row: one product per weight."""
    return 2 * math.prod(x_shape) * w_shape[0]


def _packed_conv_flops(x_shape, w_shape, *args, out_shape=None, **kwargs) -> int:
    """Each output sample: one product per input channel of its group and kernel tap."""
    return 2 * math.prod(out_shape) * math.prod(w_shape[1:])


def _packed_transposed_conv_flops(x_shape, w_shape, bias, padding, output_padding, stride,
                                  dilation, groups, *args, out_shape=None, **kwargs) -> int:
    """Each input sample: one product per output channel of its group and kernel tap."""
    return 2 * math.prod(x_shape) * out_shape[1] // groups * w_shape[-1]


def _packed_flops() -> dict:
    """FLOP formulas for the oneDNN operators our packed layers call: torch's FLOP
    counter knows aten's operators only."""
    import torch

    mkldnn = torch.ops.mkldnn
    return {
        mkldnn._linear_pointwise: _packed_linear_flops,
        mkldnn._convolution_pointwise: _packed_conv_flops,
        mkldnn._convolution_transpose_pointwise: _packed_transposed_conv_flops,
    }


def _timed(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def _timed_together(stages: list, counts: list[int], cores: int) -> list[float]:
    """Median seconds of a call of each stage, all stages running at once, one thread each.

    A stage is a context manager that, on its thread, makes the call to time. Each thread
    (on `cores` cores) times its `counts[i]` calls from a common start, then keeps
    calling, untimed, until every thread has timed its own: a stage is measured
    only while the others run beside it. One stage alone is measured by itself.
    """
    import torch

    from wyoming_pocket_tts.engine.cpu.threads import use_cores

    start = threading.Barrier(len(stages))
    lock = threading.Lock()
    untimed = [len(stages)]

    def run(index: int) -> float:
        use_cores(cores)
        try:
            with torch.inference_mode(), stages[index]() as call:
                call()  # warm-up
                start.wait()
                median = statistics.median(_timed(call) for _ in range(counts[index]))
                with lock:
                    untimed[0] -= 1
                while untimed[0]:
                    call()
                return median
        except BaseException:
            start.abort()  # nobody waits for a stage that failed
            untimed[0] = 0
            raise

    with ThreadPoolExecutor(len(stages)) as pool:
        futures = [pool.submit(run, index) for index in range(len(stages))]
        return [future.result() for future in futures]


def _frame_ms(frames_audio, samples_per_frame: int) -> float:
    """Wall milliseconds per 80 ms frame while consuming a stream of audio arrays."""
    started = time.perf_counter()
    samples = sum(chunk.shape[0] for chunk in frames_audio)
    return 1000 * (time.perf_counter() - started) / (samples / samples_per_frame)


def run_reference(configs: dict[str, str], voice: Path) -> dict:
    from pocket_tts import TTSModel

    results = {}
    for size, config in configs.items():
        model = TTSModel.load_model(config=config)
        state = model.get_state_for_audio_prompt(voice, truncate=True)
        for _ in model.generate_audio_stream(state, "Warming up."):
            pass
        results[f"frame_{size}"] = _frame_ms(
            model.generate_audio_stream(state, PARAGRAPH), FRAME_SAMPLES
        )
    return results


def run_ours(configs: dict[str, str], voice: Path) -> dict:
    import torch

    from wyoming_pocket_tts.engine.cpu.cores import available_cores
    from wyoming_pocket_tts.engine.cpu.threads import run_on_own_thread, use_cores
    from wyoming_pocket_tts.engine.model.mimi import DecoderBatch
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.runtime.policy import DECODE_FRAMES_PER_JOB
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
    from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

    cores = available_cores()

    def step_ms(synthesizer: Synthesizer, loaded) -> float:
        use_cores(cores)

        def median_step() -> float:
            utterance = synthesizer.start(loaded, PARAGRAPH)
            for _ in range(5):
                synthesizer.advance([utterance])
            times = [_timed(synthesizer.advance, [utterance]) for _ in range(STEPS)]
            utterance.close()
            return statistics.median(times)

        return 1000 * min(median_step() for _ in range(ROUNDS))

    def mimi_ms(model: PocketTTS) -> float:
        use_cores(cores)
        latents = torch.randn(1, MIMI_FRAMES_PER_CALL, model.flow_lm.latent_dim)

        def median_frame() -> float:
            state = model.mimi.new_decoder_state()
            with torch.inference_mode():
                model.mimi.decode(latents, state)
                times = [_timed(model.mimi.decode, latents, state) for _ in range(MIMI_CALLS)]
            return statistics.median(times) / MIMI_FRAMES_PER_CALL

        return 1000 * min(median_frame() for _ in range(ROUNDS))

    def mimi_mflop(model: PocketTTS) -> float:
        from torch.utils.flop_counter import FlopCounterMode

        state = model.mimi.new_decoder_state()
        latents = torch.randn(1, MIMI_FRAMES_PER_CALL, model.flow_lm.latent_dim)
        with torch.inference_mode(), FlopCounterMode(
            display=False, custom_mapping=_packed_flops()
        ) as counter:
            model.mimi.decode(latents, state)
        return counter.get_total_flops() / MIMI_FRAMES_PER_CALL / 1e6

    def four_streams_ms(synthesizer: Synthesizer, loaded, model: PocketTTS) -> dict:
        """STREAMS concurrent streams' stages as the worker runs them side by side, each on
        half the cores: a FlowLM step of them all, and a Mimi frame-row (a call takes
        DECODE_FRAMES_PER_JOB frames of each stream), each alone and the two at once."""

        @contextlib.contextmanager
        def flow_lm_step():
            utterances = [synthesizer.start(loaded, PARAGRAPH) for _ in range(STREAMS)]
            try:
                for _ in range(5):  # past the text prompt's pass
                    synthesizer.advance(utterances)
                yield lambda: synthesizer.advance(utterances)
            finally:
                for utterance in utterances:
                    utterance.close()

        @contextlib.contextmanager
        def mimi_call():
            state = DecoderBatch([model.mimi.new_decoder_state() for _ in range(STREAMS)])
            latents = torch.randn(STREAMS, DECODE_FRAMES_PER_JOB, model.flow_lm.latent_dim)
            yield lambda: model.mimi.decode(latents, state)

        stages, counts = [flow_lm_step, mimi_call], [STEPS, MIMI_CALLS]
        per_stage = max(1, cores // 2)
        alone, beside = [], []
        for _ in range(ROUNDS):
            alone.append([_timed_together([stage], [count], per_stage)[0]
                          for stage, count in zip(stages, counts, strict=True)])
            beside.append(_timed_together(stages, counts, per_stage))
        results = {"four_cores_per_stage": per_stage}
        for name, rounds in (("alone", alone), ("beside", beside)):
            step, call = (min(stage) for stage in zip(*rounds, strict=True))
            results[f"four_step_{name}"] = 1000 * step
            results[f"four_mimi_{name}"] = 1000 * call / (STREAMS * DECODE_FRAMES_PER_JOB)
        return results

    results = {}
    for size, config in configs.items():
        for quantize in (False, True):
            suffix = "_int8" if quantize else ""
            kind = f"{size}{suffix}"
            # All torch work on threads that end with it, as the server does: an
            # OpenMP pool left behind on this thread would slow every later figure.
            model = run_on_own_thread(PocketTTS.load, Path(config), quantize=quantize)
            loaded = run_on_own_thread(model.voice_from_audio, voice)
            synthesizer = Synthesizer(model)
            results[f"step_{kind}"] = run_on_own_thread(step_ms, synthesizer, loaded)
            if size == "real":
                four = four_streams_ms(synthesizer, loaded, model)
                results.update({f"{key}{suffix}": value for key, value in four.items()})
            if not quantize:
                results[f"mimi_{size}"] = run_on_own_thread(mimi_ms, model)
                results[f"mimi_mflop_{size}"] = run_on_own_thread(mimi_mflop, model)
            with SynthesisWorker(synthesizer) as worker:
                for _ in worker.stream(loaded, "Warming up."):
                    pass
                results[f"frame_{kind}"] = _frame_ms(
                    worker.stream(loaded, PARAGRAPH), model.samples_per_frame
                )
    return results


def flow_lm_megabytes(weights: Path) -> tuple[float, float]:
    """Weights a FlowLM step reads as our engine holds them: without `--quantize`, its
    linear layers' weights in float16 where the file stores bfloat16 (which float16
    holds exactly; engine/cpu/quantize.py), the rest in float32; with it (x86), the
    transformer's products in int8 and the flow head's in float16.

    The transformer and the flow head are read whole every step; the flow head's
    time embeddings are computed once (engine/model/flow_lm.py), so they are not counted.
    """
    from safetensors import safe_open

    plain = int8 = 0
    with safe_open(str(weights), "pt") as checkpoint:
        for key in checkpoint.keys():  # noqa: SIM118 (safe_open is not iterable)
            if ".time_embed." in key:
                continue
            if not key.startswith(("flow_lm.transformer.", "flow_lm.flow_net.")):
                continue
            stored = checkpoint.get_slice(key)
            elements = math.prod(stored.get_shape())
            linear = key.endswith(".weight") and len(stored.get_shape()) == 2
            halved = linear and stored.get_dtype() == "BF16"
            plain += (2 if halved else 4) * elements
            in_transformer = key.startswith("flow_lm.transformer.")
            int8 += (1 if in_transformer else 2) * elements if linear else 4 * elements
    return plain / 1e6, int8 / 1e6


def machine_rates() -> dict:
    """Read bandwidth (GB/s) on one core and on all, product rate (GFLOP/s) on all."""
    import torch
    from torch import nn

    from wyoming_pocket_tts.engine.cpu.cores import available_cores
    from wyoming_pocket_tts.engine.cpu.packed import PackedLinear, packing_supported

    def best(work) -> float:
        work()
        return min(_timed(work) for _ in range(5))

    data = torch.randn(100_000_000)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    rates = {}
    for cores in (1, available_cores()):
        torch.set_num_threads(cores)
        rates[f"read_gbs_{cores}"] = data.numel() * 4 / best(data.sum) / 1e9
    # The products as the engine runs them: torch's `@` calls MKL, which on AMD CPUs
    # stays far below what oneDNN's layout reaches (AMD EPYC with AVX-512: 142-190
    # against 357 GFLOP/s); the better of the two is the machine's rate.
    products = [lambda: a @ b]
    if packing_supported():
        packed = PackedLinear(nn.Linear(2048, 2048, bias=False))
        products.append(lambda: packed(a))
    with torch.inference_mode():
        rates["matmul_gflops"] = max(2 * 2048**3 / best(product) / 1e9 for product in products)
    rates["cores"] = available_cores()
    return rates


def _child(engine: str, configs: dict[str, str], voice: Path) -> dict:
    return run_child(__file__, engine, ["--voice", str(voice), "--configs", json.dumps(configs)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_checkpoint_arguments(parser)
    parser.add_argument("--child", choices=("reference", "ours"), help=argparse.SUPPRESS)
    parser.add_argument("--configs", help=argparse.SUPPRESS)
    parser.add_argument("--voice", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run = run_reference if args.child == "reference" else run_ours
        print(json.dumps(run(json.loads(args.configs), args.voice)))
        return

    print(
        f"building / loading the random-weight {args.model} model and its thin twin ...",
        flush=True,
    )
    real, thin = build_checkpoint(args), build_checkpoint(args, thin=True)
    voice = write_voice_wav(checkpoint_directory(args) / "voice0.wav", seconds=5.0, seed=0)
    configs = {"real": str(real.config_path), "thin": str(thin.config_path)}
    print("measuring the machine, then the reference, then ours ...", flush=True)
    rates = machine_rates()
    reference = _child("reference", configs, voice)
    ours = _child("ours", configs, voice)
    plain_mb, int8_mb = flow_lm_megabytes(real.weights_path)
    report(f"{args.model} ({args.weights} checkpoint)", rates, reference, ours, plain_mb, int8_mb)


def report(
    model: str, rates: dict, reference: dict, ours: dict, plain_mb: float, int8_mb: float
) -> None:
    cores = rates["cores"]
    bandwidth = rates[f"read_gbs_{cores}"]
    product = rates["matmul_gflops"]
    print(f"\nmodel {model}; machine: {_machine()}")
    print(f"read bandwidth {rates['read_gbs_1']:.1f} GB/s on 1 core, "
          f"{bandwidth:.1f} GB/s on {cores}; "
          f"float32 products {product:.0f} GFLOP/s on {cores} cores\n")
    print(f"{'one stream, milliseconds per 80 ms frame':52} "
          f"{'reference':>10} {'ours':>8} {'ours int8':>10}")
    rows = [
        ("a frame as served (60-word paragraph)",
         reference["frame_real"], ours["frame_real"], ours["frame_real_int8"]),
        ("  the thin model's frame: fixed costs",
         reference["frame_thin"], ours["frame_thin"], ours["frame_thin_int8"]),
        (f"FlowLM step alone, {cores} cores", None, ours["step_real"], ours["step_real_int8"]),
        ("  the thin model's step: fixed costs", None, ours["step_thin"], ours["step_thin_int8"]),
        ("  weights read at the bandwidth above",
         None, plain_mb / bandwidth, int8_mb / bandwidth),
        ("  floor: fixed costs + weights read", None,
         ours["step_thin"] + plain_mb / bandwidth, ours["step_thin_int8"] + int8_mb / bandwidth),
        (f"Mimi frame alone, {MIMI_FRAMES_PER_CALL} per call, {cores} cores",
         None, ours["mimi_real"], None),
        ("  the thin model's frame: fixed costs", None, ours["mimi_thin"], None),
        (f"  {ours['mimi_mflop_real']:.0f} MFLOP at the product rate above", None,
         ours["mimi_mflop_real"] / product, None),
        ("  floor: fixed costs + arithmetic", None,
         ours["mimi_thin"] + ours["mimi_mflop_real"] / product, None),
    ]
    for label, *values in rows:
        cells = [f"{'n/a':>{width}}" if value is None else f"{value:>{width}.1f}"
                 for value, width in zip(values, (10, 8, 10), strict=True)]
        print(f"{label:52} " + " ".join(cells))
    flow_lm_floor = ours["step_thin"] + plain_mb / bandwidth
    mimi_floor = ours["mimi_thin"] + ours["mimi_mflop_real"] / product
    print(f"\nFlowLM reads {plain_mb:.0f} MB a step without --quantize, "
          f"{int8_mb:.0f} MB with it. "
          "Taking turns (float32, one stream), a frame costs at least the FlowLM floor plus the "
          f"Mimi floor: {flow_lm_floor + mimi_floor:.1f} ms.")
    report_four_streams(ours)


def four_stream_round_ms(step: float, frame_row: float, mimi_split: bool) -> float:
    """The least wall time in which the two stages' threads can make a frame of every stream.

    As the worker runs them, Mimi's thread decodes every frame (all but its last two
    layers, a few percent, which FlowLM's thread runs): a round takes at least the
    FlowLM step and at least every stream's Mimi frame. Were Mimi's work split
    between the threads (`mimi_split`; none of the ways tried paid, see
    docs/design.md), the Mimi thread still could not take a FlowLM step: at
    least the step, and at least half the two stages' work.
    """
    if mimi_split:
        return max(step, (step + STREAMS * frame_row) / 2)
    return max(step, STREAMS * frame_row)


def report_four_streams(ours: dict) -> None:
    title = f"{STREAMS} streams side by side, {ours['four_cores_per_stage']} core(s) a stage, ms"
    print(f"\n{title:52} {'ours':>8} {'ours int8':>10}")
    rows = []
    for name, label in (("alone", "alone"), ("beside", "beside the other stage")):
        rows += [
            (f"FlowLM step of all {STREAMS}, {label}", "four_step_" + name),
            (f"Mimi frame of one stream, {label}", "four_mimi_" + name),
        ]
    for label, key in rows:
        print(f"{label:52} {ours[key]:>8.1f} {ours[key + '_int8']:>10.1f}")
    for split, form in ((False, "as run"), (True, "Mimi split")):
        for name in ("alone", "beside"):
            ratios = []
            for suffix in ("", "_int8"):
                step = ours[f"four_step_{name}{suffix}"]
                frame_row = ours[f"four_mimi_{name}{suffix}"]
                round_ms = four_stream_round_ms(step, frame_row, split)
                ratios.append(STREAMS * ours[f"frame_real{suffix}"] / round_ms)
            label = f"at best, x one stream as served ({form}, {name})"
            print(f"{label:52} {ratios[0]:>7.2f}x {ratios[1]:>9.2f}x")
    print(f"\nA round (a frame of each of the {STREAMS} streams) takes at least the FlowLM "
          "step and, "
          f"as the worker runs them ('as run'), at least the {STREAMS} streams' Mimi frames on "
          "Mimi's thread; were Mimi's work split evenly between the threads ('Mimi split'), "
          "at least half the two stages' work. Against one stream's frame as served, that is "
          f"the most {STREAMS} streams can gain; 'beside' counts the slowdown the stages cause "
          "each other through the shared caches and memory.")


if __name__ == "__main__":
    main()
