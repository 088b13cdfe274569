"""Busy-host benchmark: ours against the reference beside busy neighbours, one run.

A Home Assistant host is never quiet: speech-to-text, wake-word detection and other
add-ons want the same cores at the moment a reply is spoken. For each level of
neighbours this starts them on the cores the engines use, then runs each engine in
a child process of its own (the engines alternating, round by round) and measures:

* time to first audio for a short sentence (the median of FIRST_AUDIO_SAMPLES),
* speed: audio seconds per wall second for the 60-word paragraph, read for at most
  SPEED_WINDOW_S of wall time, so that a collapse shows without taking an hour.

The levels are a number of busy single-threaded neighbours (a Python loop each) and
`torch`: one neighbour that runs torch's matrix products on every core, as a
speech-to-text engine does. Usage:

    python benchmarks/busy_host.py [--levels 0,1,2,4,torch] [--cores 0,1] [--runs N]

`--cores` pins the engines and their neighbours to those cores (all this process
may use by default): `--cores 0-3` on a larger machine stands for a Raspberry Pi's
four.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.checkpoints import add_checkpoint_arguments, build_checkpoint, checkpoint_directory
from benchmarks.engine import PARAGRAPH, SHORT, run_child

ENGINES = ("reference", "ours")
FIRST_AUDIO_SAMPLES = 3
SPEED_WINDOW_S = 20.0
CHILD_TIMEOUT_S = 300.0
# The shape of speech-to-text: a transformer's products on every core, back to back.
TORCH_NEIGHBOUR = (
    "import torch\n"
    "a = torch.randn(512, 512)\n"
    "while True:\n"
    "    for _ in range(50):\n"
    "        a = torch.tanh(a @ a)\n"
)
BUSY_NEIGHBOUR = "while True:\n    pass\n"


def parse_cores(text: str) -> set[int]:
    """`0,1` or `0-3` or a mix, as taskset takes them."""
    cores: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cores.update(range(int(first), int(last or first) + 1))
    return cores


@contextmanager
def neighbours(level: str, cores: set[int]):
    """Busy processes on `cores` for the length of the block."""
    scripts = [TORCH_NEIGHBOUR] if level == "torch" else [BUSY_NEIGHBOUR] * int(level)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script], preexec_fn=lambda: os.sched_setaffinity(0, cores),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for script in scripts
    ]
    try:
        time.sleep(1.0 if processes else 0.0)  # torch's neighbour has imported and started
        yield
    finally:
        for process in processes:
            process.kill()
            process.wait()


def measure(start, sample_rate: int) -> dict:
    """First audio and speed of a stream-starting function `start(text)` -> frames."""

    def first_audio() -> float:
        started = time.perf_counter()
        frames = start(SHORT)
        next(iter(frames))
        elapsed = time.perf_counter() - started
        _close(frames)
        return elapsed

    def speed() -> float:
        started = time.perf_counter()
        samples = 0
        frames = start(PARAGRAPH)
        for frame in frames:
            samples += frame.shape[0]
            if time.perf_counter() - started > SPEED_WINDOW_S:
                break
        _close(frames)
        return samples / sample_rate / (time.perf_counter() - started)

    first_audio()  # warm-up
    first_audio_s = statistics.median(first_audio() for _ in range(FIRST_AUDIO_SAMPLES))
    return {"first_audio_ms": 1000 * first_audio_s, "speed_x": speed()}


def _close(frames) -> None:
    """Stop a stream early where the engine can; drain it where it cannot."""
    if hasattr(frames, "close"):
        frames.close()


def run_ours(config: Path, voice: Path) -> dict:
    from wyoming_pocket_tts.engine.cpu.process import prepare_process

    prepare_process(quantized=False)  # as the server does, before torch and its threads
    from wyoming_pocket_tts.engine.cpu.threads import run_on_own_thread
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
    from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

    model = run_on_own_thread(PocketTTS.load, config)
    state = run_on_own_thread(model.voice_from_audio, voice)
    with SynthesisWorker(Synthesizer(model)) as worker:
        return measure(lambda text: worker.stream(state, text), model.sample_rate)


def run_reference(config: Path, voice: Path) -> dict:
    from pocket_tts import TTSModel

    model = TTSModel.load_model(config=str(config))
    state = model.get_state_for_audio_prompt(voice, truncate=True)

    def start(text: str):
        # The reference cannot abandon a stream: a short text is drained, outside the
        # time measured, as its next request would wait for it; the paragraph is left
        # as it is, and the child ends without waiting for its thread (`main`).
        stream = model.generate_audio_stream(state, text)
        return _Drained(stream) if text == SHORT else stream

    return measure(start, model.sample_rate)


class _Drained:
    """A stream whose rest is generated when it is closed."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def __iter__(self):
        return self._stream

    def close(self) -> None:
        for _ in self._stream:
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_checkpoint_arguments(parser)
    parser.add_argument("--levels", default="0,1,2,4,torch")
    parser.add_argument("--cores", type=parse_cores, default=None)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--voice", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child == "reference":
        print(json.dumps(run_reference(args.config, args.voice)), flush=True)
        os._exit(0)  # the paragraph's generating thread is still at work
    if args.child == "ours":
        print(json.dumps(run_ours(args.config, args.voice)))
        return

    from tests.support.voices_audio import write_voice_wav

    cores = args.cores or os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)  # the children inherit it
    directory = checkpoint_directory(args)
    print(f"building / loading the random-weight {args.model} model in {directory} ...", flush=True)
    built = build_checkpoint(args)
    voice = write_voice_wav(directory / "voice0.wav", seconds=5.0, seed=0)
    child_args = ["--config", str(built.config_path), "--voice", str(voice)]
    levels = args.levels.split(",")
    results: dict[str, dict[str, list[dict]]] = {
        level: {e: [] for e in ENGINES} for level in levels
    }
    for round_number in range(1, args.runs + 1):
        for level in levels:
            for engine in ENGINES:
                print(f"round {round_number}/{args.runs}, neighbours {level}: {engine}", flush=True)
                with neighbours(level, cores):
                    results[level][engine].append(run_child(__file__, engine, child_args))

    print(f"\nmodel {args.model} ({args.weights} checkpoint), cores {sorted(cores)}, "
          f"{args.runs} rounds (median); machine: {_machine()}")
    print(f"{'busy neighbours':22} {'ref speed':>10} {'ours speed':>11} {'ours/ref':>9} "
          f"{'ref first':>10} {'ours first':>11} {'ours/ref':>9}")
    for level in levels:
        medians = {
            engine: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            for engine, runs in results[level].items()
        }
        ref, ours = medians["reference"], medians["ours"]
        label = "torch on every core" if level == "torch" else level
        print(
            f"{label:22} {ref['speed_x']:>9.2f}x {ours['speed_x']:>10.2f}x "
            f"{ours['speed_x'] / ref['speed_x']:>8.2f}x "
            f"{ref['first_audio_ms']:>8.0f}ms {ours['first_audio_ms']:>9.0f}ms "
            f"{ours['first_audio_ms'] / ref['first_audio_ms']:>8.2f}x"
        )


def _machine() -> str:
    import platform

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


if __name__ == "__main__":
    main()
