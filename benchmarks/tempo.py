"""What changing the speaking rate costs: microseconds of one core per 80 ms frame.

Streams the English speech sample (tests/data/speech/en.wav) through
`engine.tempo.TempoStream` frame by frame, flushing at the end of each pass as the
server does at the end of a sentence, at each speed. For each it prints the median
over --runs rounds of the mean cost of a frame (flushes included), that as a share of
the frame's 80 ms, and the slowest single push or flush of all rounds. That part
needs neither torch nor a model: numpy only.

With `--engines`, it then runs benchmarks/engine.py's children once (the reference and
ours, the standard English model at real size) and sets each speed's cost beside a
frame's synthesis: how many seconds of speech, at the model's pace and as heard at
that rate, the server makes per wall second, against the reference's speed (which has
no rate). Usage: python benchmarks/tempo.py [--frames N] [--runs N] [--engines]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np
import soundfile

from benchmarks.checkpoints import add_checkpoint_arguments, build_checkpoint, checkpoint_directory
from wyoming_pocket_tts.engine.tempo import TempoStream

SPEEDS = (0.5, 0.75, 1.25, 1.5, 2.0)
SAMPLE = ROOT / "tests" / "data" / "speech" / "en.wav"
FRAME = 1920  # 80 ms at 24 kHz, as the engine decodes it


def one_round(frames: list[np.ndarray], count: int, speed: float, rate: int) -> tuple[float, float]:
    """(mean seconds per frame, slowest single call) for `count` frames at `speed`."""
    stream = TempoStream(speed, rate)
    slowest = 0.0
    started = time.perf_counter()
    for index in range(count):
        before = time.perf_counter()
        stream.push(frames[index % len(frames)])
        if index % len(frames) == len(frames) - 1:
            stream.flush()  # the end of a sentence
        slowest = max(slowest, time.perf_counter() - before)
    stream.flush()
    return (time.perf_counter() - started) / count, slowest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=2000, help="frames per round")
    parser.add_argument("--runs", type=int, default=3, help="rounds per speed (the median)")
    parser.add_argument("--engines", action="store_true",
                        help="also measure a frame's synthesis, ours and the reference's")
    add_checkpoint_arguments(parser)
    args = parser.parse_args()

    audio, rate = soundfile.read(SAMPLE, dtype="float32")
    frames = [audio[i : i + FRAME] for i in range(0, len(audio), FRAME)]
    one_round(frames, len(frames), SPEEDS[0], rate)  # warm-up: first calls into numpy

    print(f"{args.frames} frames of 80 ms per round, median of {args.runs} rounds")
    print(f"{'speed':>6} {'us/frame':>9} {'of 80 ms':>9} {'slowest call (us)':>18}")
    costs = {}
    for speed in SPEEDS:
        rounds = [one_round(frames, args.frames, speed, rate) for _ in range(args.runs)]
        per_frame = costs[speed] = statistics.median(mean for mean, _ in rounds)
        slowest = max(worst for _, worst in rounds)
        print(
            f"{speed:>6} {per_frame * 1e6:>9.0f} {per_frame / (FRAME / rate):>9.2%}"
            f" {slowest * 1e6:>18.0f}"
        )
    if args.engines:
        beside_synthesis(args, costs, FRAME / rate)


def beside_synthesis(args: argparse.Namespace, costs: dict[float, float], frame_s: float) -> None:
    """Each speed's cost next to a frame's synthesis, ours and the reference's."""
    from benchmarks.engine import run_child
    from tests.support.voices_audio import write_voice_wav

    built = build_checkpoint(args)
    voices = [  # engine.py's three voices
        write_voice_wav(checkpoint_directory(args) / f"voice{i}.wav", seconds=5.0, seed=i)
        for i in range(3)
    ]
    script = str(ROOT / "benchmarks" / "engine.py")
    arguments = ["--config", str(built.config_path),
                 *(arg for voice in voices for arg in ("--voice", str(voice)))]
    speeds = {engine: run_child(script, engine, arguments)["speed_x"]
              for engine in ("reference", "ours")}
    synthesis = {engine: frame_s / speed for engine, speed in speeds.items()}
    print(f"\na frame's synthesis: ours {synthesis['ours'] * 1e3:.1f} ms, reference "
          f"{synthesis['reference'] * 1e3:.1f} ms (speeds {speeds['ours']:.2f} and "
          f"{speeds['reference']:.2f}x real time)")
    print(f"{'speed':>6} {'tempo/synthesis':>16} {'model pace x':>13} {'/ref':>6} "
          f"{'as heard x':>11} {'/ref':>6}")
    for speed, cost in costs.items():
        wall = synthesis["ours"] + cost  # as if on the synthesis thread: an upper bound
        pace = frame_s / wall
        heard = pace / speed
        print(f"{speed:>6} {cost / synthesis['ours']:>16.2%} {pace:>13.2f} "
              f"{pace / speeds['reference']:>5.2f}x {heard:>11.2f} "
              f"{heard / speeds['reference']:>5.2f}x")


if __name__ == "__main__":
    main()
