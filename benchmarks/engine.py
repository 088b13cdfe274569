"""Engine benchmark: ours against the reference (pocket-tts 4.0.1), side by side, one run.

Builds a real-size random-weight model of the chosen family (cached), then runs
each engine in a child process of its own, so that each keeps its own thread
settings (the reference sets torch to one thread when imported) and its peak
memory is its own. The engines take turns, one child each per round for --runs
rounds, so that a slow spell of the machine (they last minutes here) falls on all
of them; every figure is the median over the rounds. For each engine it prints:

* start-up: seconds from nothing to a loaded model,
* time to first audio: request to the first decoded frame, voice already loaded,
  for a short sentence (each round: the median of FIRST_AUDIO_SAMPLES requests),
* speed: audio seconds per wall second for a 60-word paragraph,
* peak resident memory with the model and three voices loaded,
* (ours only: the reference is not safe to share between threads) four
  concurrent streams: aggregate audio seconds per wall second, that against one
  stream's speed in the same round (the target: at least 2x), and the slowest
  stream's own speed; and a short request that comes while four paragraphs are
  spoken: its time to first audio, and how far its audio fell behind at worst,
  played from its first frame (0: it never ran dry); and four short requests
  coming 10 ms apart on an idle engine (four satellites answering at once): the
  latest first audio of the four, and the worst lateness of any,

and the ratios ours / reference. Usage: python benchmarks/engine.py [--model NAME] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.checkpoints import add_checkpoint_arguments, build_checkpoint, checkpoint_directory

ENGINES = ("reference", "ours", "ours-int8")
FIRST_AUDIO_SAMPLES = 5
NEWCOMER_AFTER_SECONDS = 3.0  # the four streams are well under way by then
ARRIVALS_APART_SECONDS = 0.01  # four short requests at once, as clients connect
SHORT = "Done, the kitchen light is on."
PARAGRAPH = (
    "Good morning! It is seven thirty, and the weather in the city is mild: fourteen degrees, "
    "a light breeze from the west, and a small chance of rain after lunch. Your first meeting "
    "starts at nine in the small conference room. The dishwasher finished its cycle, the front "
    "door is locked, and the living room lights will turn off in ten minutes."
)


def _peak_rss_mb() -> float:
    """This process's peak resident memory: VmHWM, where Linux has it.

    Not getrusage's `ru_maxrss`, which Linux carries over from the parent into a
    child it starts (across fork and exec): a child started by a parent that had just
    built a model reported the parent's peak (the 18M family: 619 MB, its own 398).
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_ours(config: Path, voices: list[Path], quantize: bool = False) -> dict:
    from wyoming_pocket_tts.engine.cpu.process import prepare_process

    prepare_process(quantized=quantize)  # as the server does, before torch and its threads
    from wyoming_pocket_tts.engine.cpu.threads import run_on_own_thread
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
    from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

    started = time.perf_counter()
    # Loaded as the server loads: on a thread that ends with it (see engine/cpu/threads.py).
    model = run_on_own_thread(PocketTTS.load, config, quantize=quantize)
    startup = time.perf_counter() - started
    loaded = run_on_own_thread(lambda: [model.voice_from_audio(v) for v in voices])
    worker = SynthesisWorker(Synthesizer(model))
    worker.start()

    def first_audio() -> float:
        started = time.perf_counter()
        stream = worker.stream(loaded[0], SHORT)
        next(stream)
        elapsed = time.perf_counter() - started
        for _ in stream:  # as the reference must: the next request finds the engine idle
            pass
        return elapsed

    def speed() -> float:
        started = time.perf_counter()
        samples = sum(frame.shape[0] for frame in worker.stream(loaded[0], PARAGRAPH))
        return samples / model.sample_rate / (time.perf_counter() - started)

    def four_paragraphs(started: float) -> tuple[list, list[threading.Thread], list[float]]:
        """Four paragraphs at once, each drained by a listener thread that records its speed."""
        jobs = [worker.submit(voice, PARAGRAPH) for voice in loaded + loaded[:1]]
        speeds: list[float] = []
        threads = [threading.Thread(target=lambda job=job: speeds.append(_drain(job, started)))
                   for job in jobs]
        for thread in threads:
            thread.start()
        return jobs, threads, speeds

    def concurrent() -> tuple[float, float]:
        """Four streams at once: aggregate speed, and the slowest stream's own speed."""
        started = time.perf_counter()
        jobs, threads, speeds = four_paragraphs(started)
        for thread in threads:
            thread.join()
        total = sum(job.samples for job in jobs) / model.sample_rate
        return total / (time.perf_counter() - started), min(speeds)

    def four_arrivals() -> tuple[float, float]:
        """Four short requests 10 ms apart: the latest first audio, the worst lateness."""
        while worker.active_jobs:  # the newcomer's paragraphs, cancelled, leave first
            time.sleep(0.01)
        heard: list[tuple[float, float]] = []
        threads = []
        for voice in loaded + loaded[:1]:
            stream = worker.stream(voice, SHORT)
            threads.append(threading.Thread(
                target=lambda stream=stream: heard.append(_listen(stream, model.sample_rate))
            ))
            threads[-1].start()
            time.sleep(ARRIVALS_APART_SECONDS)
        for thread in threads:
            thread.join()
        return max(first for first, _ in heard), max(late for _, late in heard)

    def newcomer() -> tuple[float, float]:
        """A short request while four paragraphs are spoken: see `_listen`."""
        jobs, threads, _ = four_paragraphs(time.perf_counter())
        time.sleep(NEWCOMER_AFTER_SECONDS)
        try:
            return _listen(worker.stream(loaded[1], SHORT), model.sample_rate)
        finally:
            for job in jobs:
                job.cancel()
            for thread in threads:
                thread.join()

    try:
        results = _measure(startup, first_audio, speed)
        if quantize:
            # On a thread of its own, as the loads: an OpenMP pool made on the main
            # thread would stay beside the worker's and slow its later figures.
            results.update(run_on_own_thread(_int8_error, config, model, loaded[0]))
        results["concurrent_x"], results["slowest_stream_x"] = concurrent()
        results["concurrent_over_one"] = results["concurrent_x"] / results["speed_x"]
        results["newcomer_first_audio_ms"], results["newcomer_late_ms"] = newcomer()
        results["arrivals_first_audio_ms"], results["arrivals_late_ms"] = four_arrivals()
    finally:
        # Its threads end before the process does: a daemon thread caught inside a
        # torch operator when Python exits aborts the process ("terminate called").
        worker.close()
    return results


def _int8_error(config: Path, quantized, voice, frames: int = 40) -> dict[str, float]:
    """Relative error of `--quantize` FlowLM outputs against float32 on the same inputs:
    the transformer's (what the int8 layers change) and the latents its flow head
    samples from them with the same noise (what Mimi hears)."""
    import math

    import torch

    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer

    reference = PocketTTS.load(config)
    (chunk,) = Synthesizer(reference).chunks(SHORT)
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn(frames, reference.flow_lm.latent_dim, generator=generator)
    noise *= math.sqrt(reference.config.default_temperature)

    def outputs(model, latents: list) -> tuple[torch.Tensor, torch.Tensor]:
        flow_lm = model.flow_lm
        cache = model.new_cache(voice.num_positions + chunk.tokens.shape[1] + frames)
        cache.reset(voice.keys, voice.values, cache.capacity)
        previous, prefix = flow_lm.bos_emb[None], flow_lm.conditioner(chunk.tokens)
        zs, sampled = [], []
        for i in range(frames):
            z = flow_lm.step(previous, [cache], None if prefix is None else [prefix])
            prefix = None
            sampled.append(flow_lm.sample(z, noise[i : i + 1]))
            if len(latents) <= i:  # the float model chooses the inputs for both
                latents.append(sampled[-1])
            previous = latents[i]
            zs.append(z)
        return torch.cat(zs), torch.cat(sampled)

    def relative(approximate: torch.Tensor, exact: torch.Tensor) -> float:
        return float((approximate - exact).norm() / exact.norm())

    with torch.inference_mode():
        latents: list = []
        exact = outputs(reference, latents)
        approximate = outputs(quantized, latents)
    return {
        "int8_error": relative(approximate[0], exact[0]),
        "int8_latent_error": relative(approximate[1], exact[1]),
    }


def _listen(stream, sample_rate: int) -> tuple[float, float]:
    """A stream's time to first audio, and how late its audio came at worst (ms).

    Lateness is against a player that starts with the first frame: how long it
    would have waited for the next frame at worst (0 if it never ran dry).
    """
    started = time.perf_counter()
    first = next(stream)
    playing_since = time.perf_counter()
    heard, late = first.shape[0] / sample_rate, 0.0
    for frame in stream:
        late = max(late, time.perf_counter() - playing_since - heard)
        heard += frame.shape[0] / sample_rate
    return 1000 * (playing_since - started), 1000 * late


def _drain(job, started: float) -> float:
    """Consume a job's audio; its own speed in audio seconds per wall second."""
    samples = sum(frame.shape[0] for frame in job.frames())
    return samples / 24000 / (time.perf_counter() - started)


def run_reference(config: Path, voices: list[Path]) -> dict:
    from pocket_tts import TTSModel

    started = time.perf_counter()
    model = TTSModel.load_model(config=str(config))
    startup = time.perf_counter() - started
    states = [model.get_state_for_audio_prompt(v, truncate=True) for v in voices]

    def first_audio() -> float:
        started = time.perf_counter()
        stream = model.generate_audio_stream(states[0], SHORT)
        next(stream)
        elapsed = time.perf_counter() - started
        for _ in stream:  # the reference has no way to abandon a stream
            pass
        return elapsed

    def speed() -> float:
        started = time.perf_counter()
        samples = sum(chunk.shape[0] for chunk in model.generate_audio_stream(states[0], PARAGRAPH))
        return samples / model.sample_rate / (time.perf_counter() - started)

    return _measure(startup, first_audio, speed)


def _measure(startup: float, first_audio, speed) -> dict:
    first_audio()  # warm-up: lazy initialisation is not what we measure
    first_audio_s = statistics.median(first_audio() for _ in range(FIRST_AUDIO_SAMPLES))
    return {
        "startup_s": startup,
        "first_audio_ms": 1000 * first_audio_s,
        "speed_x": speed(),
        "peak_rss_mb": _peak_rss_mb(),
    }


def run_child(script: str, engine: str, arguments: list[str]) -> dict:
    """`script --child engine arguments...` in a process of its own; the JSON it prints last."""
    command = [sys.executable, script, "--child", engine, *arguments]
    done = subprocess.run(command, check=False, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _child(engine: str, config: Path, voices: list[Path]) -> dict:
    voice_arguments = [arg for voice in voices for arg in ("--voice", str(voice))]
    return run_child(__file__, engine, ["--config", str(config), *voice_arguments])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_checkpoint_arguments(parser)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--voice", type=Path, action="append", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child == "reference":
        print(json.dumps(run_reference(args.config, args.voice)))
        return
    if args.child:
        print(json.dumps(run_ours(args.config, args.voice, args.child == "ours-int8")))
        return

    from tests.support.voices_audio import write_voice_wav

    directory = checkpoint_directory(args)
    print(f"building / loading the random-weight {args.model} model in {directory} ...", flush=True)
    built = build_checkpoint(args)
    voices = [write_voice_wav(directory / f"voice{i}.wav", seconds=5.0, seed=i) for i in range(3)]
    rounds = []
    for round_number in range(1, args.runs + 1):
        print(f"round {round_number} of {args.runs}: {', '.join(ENGINES)}", flush=True)
        rounds.append({engine: _child(engine, built.config_path, voices) for engine in ENGINES})
    results = {
        engine: {
            key: statistics.median(r[engine][key] for r in rounds) for key in rounds[0][engine]
        }
        for engine in ENGINES
    }
    rows = [
        ("start-up to loaded model (s)", "startup_s", "{:.2f}"),
        ("time to first audio (ms)", "first_audio_ms", "{:.0f}"),
        ("speed (audio s per wall s)", "speed_x", "{:.2f}"),
        ("peak memory, model + 3 voices (MB)", "peak_rss_mb", "{:.0f}"),
        ("4 concurrent streams, aggregate speed", "concurrent_x", "{:.2f}"),
        ("4 concurrent streams / one stream", "concurrent_over_one", "{:.2f}"),
        ("4 concurrent streams, slowest stream", "slowest_stream_x", "{:.2f}"),
        ("4 streams + new request: first audio (ms)", "newcomer_first_audio_ms", "{:.0f}"),
        ("4 streams + new request: late by (ms)", "newcomer_late_ms", "{:.0f}"),
        ("4 short 10 ms apart: last first audio (ms)", "arrivals_first_audio_ms", "{:.0f}"),
        ("4 short 10 ms apart: worst late by (ms)", "arrivals_late_ms", "{:.0f}"),
    ]
    print(f"\nmodel {args.model} ({args.weights} checkpoint), {args.runs} rounds (median); "
          f"machine: {_machine()}")
    print(f"{'':42} {'reference':>10} {'ours':>10} {'ours/ref':>9} "
          f"{'ours int8':>10} {'int8/ref':>9}")
    for label, key, fmt in rows:
        cells = []
        for engine in ENGINES:
            value = results[engine].get(key)
            cells.append(f"{fmt.format(value):>10}" if value is not None else f"{'n/a':>10}")
            ref = results["reference"].get(key)
            if engine != "reference":
                cells.append(f"{value / ref:>8.2f}x" if ref else f"{'':>9}")
        print(f"{label:42} " + " ".join(cells))
    int8 = results["ours-int8"]
    print(
        "--quantize: FlowLM's outputs against float32 on the same inputs (relative error): "
        f"transformer {int8['int8_error']:.2%}, latents {int8['int8_latent_error']:.2%}"
    )


def _machine() -> str:
    import os
    import platform

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


if __name__ == "__main__":
    main()
