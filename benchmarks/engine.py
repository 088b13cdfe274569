"""Engine benchmark: ours against the reference (pocket-tts 4.0.1), side by side, one run.

Builds a real-size random-weight model of the chosen family (cached), then runs
each engine in a child process of its own, so that each keeps its own thread
settings (the reference sets torch to one thread when imported) and its peak
memory is its own. For each engine it prints:

* start-up: seconds from nothing to a loaded model,
* time to first audio: request to the first decoded frame, voice already loaded,
  for a short sentence (median of --runs),
* speed: audio seconds per wall second for a 60-word paragraph (median of --runs),
* peak resident memory with the model and three voices loaded,

and the ratios ours / reference. Usage: python benchmarks/engine.py [--model NAME] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHORT = "Done, the kitchen light is on."
PARAGRAPH = (
    "Good morning! It is seven thirty, and the weather in the city is mild: fourteen degrees, "
    "a light breeze from the west, and a small chance of rain after lunch. Your first meeting "
    "starts at nine in the small conference room. The dishwasher finished its cycle, the front "
    "door is locked, and the living room lights will turn off in ten minutes."
)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_ours(config: Path, voices: list[Path], runs: int) -> dict:
    from wyoming_pocket_tts.engine.model import PocketTTS
    from wyoming_pocket_tts.engine.scheduler import SynthesisWorker
    from wyoming_pocket_tts.engine.synthesizer import Synthesizer

    started = time.perf_counter()
    model = PocketTTS.load(config)
    startup = time.perf_counter() - started
    loaded = [model.voice_from_audio(v) for v in voices]
    worker = SynthesisWorker(Synthesizer(model))
    worker.start()

    def first_audio() -> float:
        started = time.perf_counter()
        stream = worker.stream(loaded[0], SHORT)
        next(stream)
        elapsed = time.perf_counter() - started
        stream.close()
        return elapsed

    def speed() -> float:
        started = time.perf_counter()
        samples = sum(frame.shape[0] for frame in worker.stream(loaded[0], PARAGRAPH))
        return samples / model.sample_rate / (time.perf_counter() - started)

    return _measure(startup, first_audio, speed, runs)


def run_reference(config: Path, voices: list[Path], runs: int) -> dict:
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

    return _measure(startup, first_audio, speed, runs)


def _measure(startup: float, first_audio, speed, runs: int) -> dict:
    first_audio()  # warm-up: lazy initialisation is not what we measure
    return {
        "startup_s": startup,
        "first_audio_ms": 1000 * statistics.median(first_audio() for _ in range(runs)),
        "speed_x": statistics.median(speed() for _ in range(runs)),
        "peak_rss_mb": _peak_rss_mb(),
    }


def _child(engine: str, config: Path, voices: list[Path], runs: int) -> dict:
    command = [
        sys.executable, __file__, "--child", engine, "--config", str(config), "--runs", str(runs),
        *[arg for voice in voices for arg in ("--voice", str(voice))],
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="english_2026-10", help="pocket-tts config name")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "wyoming-pocket-tts-bench")
    parser.add_argument("--child", choices=["ours", "reference"], help=argparse.SUPPRESS)
    parser.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--voice", type=Path, action="append", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        runner = run_ours if args.child == "ours" else run_reference
        print(json.dumps(runner(args.config, args.voice, args.runs)))
        return

    sys.path.insert(0, str(ROOT))
    from tests.support.reference_model import build_model
    from tests.support.voices_audio import write_voice_wav

    directory = args.cache / args.model
    print(f"building / loading the random-weight {args.model} model in {directory} ...", flush=True)
    built = build_model(directory, base=args.model, tokenizer_dir=args.cache / "tokenizers")
    voices = [write_voice_wav(directory / f"voice{i}.wav", seconds=5.0, seed=i) for i in range(3)]
    results = {engine: _child(engine, built.config_path, voices, args.runs)
               for engine in ("reference", "ours")}
    rows = [
        ("start-up to loaded model (s)", "startup_s", "{:.2f}"),
        ("time to first audio (ms)", "first_audio_ms", "{:.0f}"),
        ("speed (audio s per wall s)", "speed_x", "{:.2f}"),
        ("peak memory, model + 3 voices (MB)", "peak_rss_mb", "{:.0f}"),
    ]
    print(f"\nmodel {args.model}, {args.runs} runs (median); machine: {_machine()}")
    print(f"{'':38} {'reference':>10} {'ours':>10} {'ours/ref':>9}")
    for label, key, fmt in rows:
        ref, ours = results["reference"][key], results["ours"][key]
        print(f"{label:38} {fmt.format(ref):>10} {fmt.format(ours):>10} {ours / ref:>8.2f}x")


def _machine() -> str:
    import os
    import platform

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


if __name__ == "__main__":
    main()
