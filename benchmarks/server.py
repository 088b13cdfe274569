"""Server benchmark: our Wyoming server measured over the protocol, beside the engines.

Builds (or reuses, from the cache benchmarks/engine.py fills) the real-size
random-weight model, starts `python -m wyoming_pocket_tts` as a subprocess on a
free loopback port and speaks to it with the `wyoming` package's own client, as
Home Assistant does. For a short command answer and a 60-word paragraph, each
sent as one `synthesize` and as a text stream (`synthesize-start`, one
`synthesize-chunk` per word as an LLM produces them, `synthesize-stop`), it
measures

* time to first audio: request sent to the first audio-chunk received,
* speed: audio seconds per wall second, request sent to the last audio-stop
  (streamed: to synthesize-stopped),

and, with 4 clients asking at once, the aggregate speed and each stream's own; and
the short answer once more after the engine or server has sat idle for two seconds,
as Home Assistant's requests come (on the VMs we measured on, it starts later than
back to back, on the engine too: the idle cores have to wake up).
Beside each figure it prints the same figures measured on the engines directly
(ours, and the reference pocket-tts 4.0.1, each in a child process of its own),
and the ratio protocol / engine, which is the cost of the server: the goal is
within 10%. The engines' children and the server are started once and stay up;
each measure (a text, the clients at once, the pause) is taken on the three one
right after the other (reference, ours, then the server), each after a warm-up
request, so that the three figures are seconds apart: the machine's speed moves by
10-40% within minutes, and when they were measured a minute or more apart (each
engine child loading the model anew every round, until December 2026) that alone
carried the ratio past the 10% margin. Each round measures each text once on each;
every figure is the median over the rounds (--runs; the paragraph, which takes most
of a minute, in the first --paragraph-runs of them).

If `wyoming-bench` (PyPI) is installed, it measures the short answer too, each
round right after our client, as a second opinion from a client that is not ours,
with its default warm-up request (untimed) before each mode's timed one, as our
client and the engines have one.

Usage: python benchmarks/server.py [--model NAME] [--runs N] [--paragraph-runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.checkpoints import add_checkpoint_arguments, build_checkpoint, checkpoint_directory
from benchmarks.engine import PARAGRAPH, SHORT, _machine
from benchmarks.local_server import LocalServer, wait_or_kill

TEXTS = {"short": SHORT, "paragraph": PARAGRAPH}
# "concurrent": CLIENTS short answers at once; "idle": the short answer after IDLE_S
MEASURES = ("short", "paragraph", "concurrent", "idle")
IDLE_S = 2.0
AFTER_IDLE = "short after idle"
CLIENTS = 4  # concurrent clients, each asking for the short answer


@dataclass(frozen=True)
class Timing:
    """One request, from the moment it was sent."""

    first_audio_s: float
    audio_s: float
    wall_s: float

    @property
    def speed(self) -> float:
        return self.audio_s / self.wall_s


def _summary(timings: list[Timing]) -> dict:
    return {
        "first_audio_ms": 1000 * statistics.median(t.first_audio_s for t in timings),
        "speed_x": statistics.median(t.speed for t in timings),
    }


def _concurrent_summary(timings: list[Timing], wall_s: float) -> dict:
    speeds = [t.speed for t in timings]
    return {
        "aggregate_x": sum(t.audio_s for t in timings) / wall_s,
        "stream_min_x": min(speeds),
        "stream_median_x": statistics.median(speeds),
        "first_audio_ms": 1000 * statistics.median(t.first_audio_s for t in timings),
    }


# ---------------------------------------------------------------------------
# Engine level (child processes)


def _time_stream(open_stream: Callable[[], Iterator], sample_rate: int) -> Timing:
    """Open a stream of audio frames and drain it."""
    started = time.perf_counter()
    first = None
    samples = 0
    for frame in open_stream():
        if first is None:
            first = time.perf_counter() - started
        samples += frame.shape[0]
    assert first is not None, "the engine produced no audio"
    return Timing(first, samples / sample_rate, time.perf_counter() - started)


@dataclass(frozen=True)
class LoadedEngine:
    """An engine with the model and the voice loaded, reduced to what is timed."""

    stream: Callable[[str], Iterator]  # text -> audio frames, work starting at the first
    sample_rate: int
    close: Callable[[], None]


def _load_ours(config: Path, voice: Path) -> LoadedEngine:
    from wyoming_pocket_tts.engine.cpu.process import prepare_process

    prepare_process(quantized=False)  # as the server does, before torch and its threads
    from wyoming_pocket_tts.engine.cpu.threads import run_on_own_thread
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
    from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

    # Loaded as the server loads: on a thread that ends with it (see engine/cpu/threads.py).
    model = run_on_own_thread(PocketTTS.load, config)
    state = run_on_own_thread(model.voice_from_audio, voice)
    worker = SynthesisWorker(Synthesizer(model))
    worker.start()
    return LoadedEngine(partial(worker.stream, state), model.sample_rate, worker.close)


def _load_reference(config: Path, voice: Path) -> LoadedEngine:
    from pocket_tts import TTSModel

    model = TTSModel.load_model(config=str(config))
    state = model.get_state_for_audio_prompt(voice, truncate=True)
    return LoadedEngine(
        partial(model.generate_audio_stream, state), model.sample_rate, lambda: None
    )


def serve_engine(engine: str, config: Path, voice: Path) -> None:
    """The child: loads the engine once, then measures one of `MEASURES` for each
    line read from stdin, each after a warm-up request, and writes its result as
    one JSON line."""
    loaded = (_load_ours if engine == "ours" else _load_reference)(config, voice)
    try:
        for line in sys.stdin:
            print(json.dumps(_measure_engine(loaded, engine, line.strip())), flush=True)
    finally:
        loaded.close()


def _measure_engine(loaded: LoadedEngine, engine: str, name: str) -> dict:
    _time_stream(partial(loaded.stream, SHORT), loaded.sample_rate)  # warm-up
    if name in TEXTS:
        return {name: asdict(_time_stream(partial(loaded.stream, TEXTS[name]), loaded.sample_rate))}
    if name == "concurrent":  # the reference serves one stream at a time
        return {"concurrent": _engine_concurrently(loaded)} if engine == "ours" else {}
    time.sleep(IDLE_S)
    return {AFTER_IDLE: asdict(_time_stream(partial(loaded.stream, SHORT), loaded.sample_rate))}


def _engine_concurrently(loaded: LoadedEngine) -> dict:
    """CLIENTS consumer threads on one worker, as the server's connections share it."""
    timings: list[Timing] = []
    threads = [
        threading.Thread(
            target=lambda: timings.append(
                _time_stream(partial(loaded.stream, SHORT), loaded.sample_rate)
            )
        )
        for _ in range(CLIENTS)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return _concurrent_summary(timings, time.perf_counter() - started)


class EngineChild:
    """An engine in a child process of its own, loaded once, measuring on request.

    It stays up for the whole run, idle while the others measure, so that the
    engines and the server can measure each text one after the other, seconds
    apart: the machine's speed moves by 10-40% within minutes.
    """

    def __init__(self, engine: str, config: Path, voice: Path):
        self.engine = engine
        # A file, not a pipe: a pipe left unread could fill and block the server. Closed by
        # close(): the server outlives any one block.
        self._log = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self._process = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                engine,
                "--config",
                str(config),
                "--voice",
                str(voice),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=ROOT,
        )

    def measure(self, name: str) -> dict:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(f"{name}\n")
        self._process.stdin.flush()
        for line in self._process.stdout:  # skipping anything else an engine prints
            if line.startswith("{"):
                return json.loads(line)
        self._log.seek(0)
        raise SystemExit(f"engine {self.engine} failed:\n{self._log.read()[-3000:]}")

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()  # end of input: the child finishes and exits
        wait_or_kill(self._process, timeout=60)
        self._log.close()


# ---------------------------------------------------------------------------
# Over the protocol


def _words(text: str) -> list[str]:
    """Pieces as an LLM streams them: one word with the space after it."""
    return re.findall(r"\S+\s*", text)


async def request(port: int, text: str, streamed: bool) -> Timing:
    """One request on a fresh connection (as Home Assistant makes one per request)."""
    from wyoming.audio import AudioChunk, AudioStart, AudioStop
    from wyoming.client import AsyncTcpClient
    from wyoming.error import Error
    from wyoming.tts import (
        Synthesize,
        SynthesizeChunk,
        SynthesizeStart,
        SynthesizeStop,
        SynthesizeStopped,
    )

    end_type = SynthesizeStopped if streamed else AudioStop
    async with AsyncTcpClient("127.0.0.1", port) as client:
        started = time.perf_counter()

        async def read() -> Timing:
            first = None
            audio_bytes = 0
            bytes_per_second = 0
            while (event := await client.read_event()) is not None:
                if Error.is_type(event.type):
                    raise SystemExit(
                        f"the server answered an error: {Error.from_event(event).text}"
                    )
                if AudioStart.is_type(event.type):
                    start = AudioStart.from_event(event)
                    bytes_per_second = start.rate * start.width * start.channels
                elif AudioChunk.is_type(event.type):
                    if first is None:
                        first = time.perf_counter() - started
                    audio_bytes += len(event.payload or b"")
                elif end_type.is_type(event.type):
                    assert first is not None, "no audio before the end of the answer"
                    return Timing(
                        first, audio_bytes / bytes_per_second, time.perf_counter() - started
                    )
            raise SystemExit("the server closed the connection before the end of the answer")

        if not streamed:
            await client.write_event(Synthesize(text=text).event())
            return await read()
        reader = asyncio.create_task(read())  # audio may start while words are still sent
        await client.write_event(SynthesizeStart().event())
        for word in _words(text):
            await client.write_event(SynthesizeChunk(text=word).event())
        await client.write_event(SynthesizeStop().event())
        return await reader


async def measure_protocol(port: int, name: str) -> dict:
    """One of `MEASURES` over the protocol (a text both ways), after a warm-up request
    as each engine child makes one."""
    await request(port, SHORT, streamed=False)
    if name in TEXTS:
        return {
            f"{name} streamed" if streamed else name: asdict(
                await request(port, TEXTS[name], streamed)
            )
            for streamed in (False, True)
        }
    if name == "concurrent":
        started = time.perf_counter()
        timings = await asyncio.gather(*(request(port, SHORT, False) for _ in range(CLIENTS)))
        return {"concurrent": _concurrent_summary(list(timings), time.perf_counter() - started)}
    await asyncio.sleep(IDLE_S)
    return {AFTER_IDLE: asdict(await request(port, SHORT, streamed=False))}


def round_measures(round_index: int, runs: int, paragraph_runs: int) -> list[str]:
    """What a round measures: the short answer and the clients at once in the first
    `runs` rounds, the paragraph in the first `paragraph_runs`."""
    due = {"short": runs, "paragraph": paragraph_runs, "concurrent": runs, "idle": runs}
    return [name for name in MEASURES if round_index < due[name]]


def medians(rounds: list[dict]) -> dict:
    """Each figure's median over the rounds that measured it."""
    collected: dict[str, list[dict]] = {}
    for results in rounds:
        for key, value in results.items():
            collected.setdefault(key, []).append(value)
    summary = {}
    for key, values in collected.items():
        if key == "concurrent":
            summary[key] = {name: statistics.median(v[name] for v in values) for name in values[0]}
        else:
            summary[key] = _summary([Timing(**value) for value in values])
    return summary


def wyoming_bench_executable() -> str | None:
    executable = shutil.which("wyoming-bench") or str(
        Path(sys.executable).with_name("wyoming-bench")
    )
    return executable if Path(executable).exists() else None


# One measurement as `wyoming-bench -v` prints it.
_WYOMING_BENCH_LINE = re.compile(
    r"^\[(non_streaming|streaming)\] r\d+ .*?ttft=([\d.]+)ms total=([\d.]+)ms audio=([\d.]+)s",
    re.MULTILINE,
)


def run_wyoming_bench(executable: str, port: int) -> dict:
    """One round of the third-party client on the short answer, both ways, each after
    its default warm-up request (untimed; with none, its first request came after
    the server had sat idle while the client started, and measured that instead: see
    the "idle" measure).

    Its streaming mode sends the text as one `synthesize-chunk` per sentence.
    Raises RuntimeError with its output if it fails.
    """
    command = [
        executable,
        "tts",
        f"127.0.0.1:{port}",
        "--texts",
        SHORT,
        "--no-unique",
        "--rounds",
        "1",
        "--mode",
        "both",
        "-v",
    ]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    found = {
        mode: Timing(float(ttft) / 1000, float(audio), float(total) / 1000)
        for mode, ttft, total, audio in _WYOMING_BENCH_LINE.findall(done.stdout)
    }
    if done.returncode != 0 or set(found) != {"non_streaming", "streaming"}:
        raise RuntimeError(f"({done.returncode}):\n{(done.stderr or done.stdout)[-2000:]}")
    return {
        "wyoming-bench": asdict(found["non_streaming"]),
        "wyoming-bench streamed": asdict(found["streaming"]),
    }


# ---------------------------------------------------------------------------
# Report


def _row(
    label: str,
    protocol: float,
    ours: float | None,
    ref: float | None,
    fmt: str,
    higher_is_better: bool,
) -> str:
    def cell(value: float | None) -> str:
        return "-" if value is None else fmt.format(value)

    if ours is None:
        verdict = ""
    else:
        ratio = protocol / ours
        within = ratio >= 0.9 if higher_is_better else ratio <= 1.1
        verdict = f"{ratio:>8.2f}x {'ok' if within else 'OVER 10%'}"
    return f"{label:40} {cell(protocol):>9} {cell(ours):>9} {cell(ref):>9} {verdict}"


def print_table(protocol: dict, ours: dict, reference: dict, args: argparse.Namespace) -> None:
    print(
        f"\nmodel {args.model}, {args.weights} checkpoint (random weights: no end of speech, "
        "every chunk runs to its "
        f"frame cap);\nmedian of {args.runs} rounds (paragraph: {args.paragraph_runs}); "
        f"machine: {_machine()}, {_cpu_name()};\nother work on the machine: 1-minute load "
        f"average {args.load_before:.2f} when the run started"
    )
    print(f"{'':40} {'protocol':>9} {'engine':>9} {'engine':>9} {'protocol/engine':>16}")
    print(f"{'':40} {'ours':>9} {'ours':>9} {'ref':>9}")
    # (the protocol's figure, the engines' figure beside it, heading)
    rows = [
        (key, name, f"{name} ({len(text.split())} words), {how}")
        for name, text in TEXTS.items()
        for key, how in ((name, "one synthesize"), (f"{name} streamed", "streamed word by word"))
    ]
    rows.append((AFTER_IDLE, AFTER_IDLE, f"short, after {IDLE_S:g} s of idleness, one synthesize"))
    rows += [
        (key, "short", f"short, measured by wyoming-bench (PyPI), {how}")
        for key, how in (
            ("wyoming-bench", "one synthesize"),
            ("wyoming-bench streamed", "streamed, one chunk per sentence"),
        )
        if key in protocol
    ]
    for key, name, heading in rows:
        print(heading)
        for label, figure, fmt, higher in (
            ("  time to first audio (ms)", "first_audio_ms", "{:.1f}", False),
            ("  speed (audio s per wall s)", "speed_x", "{:.2f}", True),
        ):
            got, engine, ref = protocol[key], ours[name], reference[name]
            print(
                _row(label, got[figure], engine[figure], ref[figure], fmt, higher_is_better=higher)
            )
    got, engine = protocol["concurrent"], ours["concurrent"]
    print(f"{CLIENTS} clients at once, short answer each")
    for label, key, fmt, higher in (
        ("  aggregate speed (audio s per wall s)", "aggregate_x", "{:.2f}", True),
        ("  slowest stream's own speed", "stream_min_x", "{:.2f}", True),
        ("  median stream's own speed", "stream_median_x", "{:.2f}", True),
        ("  median time to first audio (ms)", "first_audio_ms", "{:.1f}", False),
    ):
        print(_row(label, got[key], engine[key], None, fmt, higher_is_better=higher))


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_checkpoint_arguments(parser)
    parser.add_argument(
        "--runs", type=int, default=3, help="rounds (the short answer and 4 clients: one each)"
    )
    parser.add_argument(
        "--paragraph-runs",
        type=int,
        default=1,
        help="rounds with the paragraph (56 s of audio on a random-weight model: most of a "
        "minute each)",
    )
    parser.add_argument("--child", choices=["ours", "reference"], help=argparse.SUPPRESS)
    parser.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--voice", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runs < 1 or args.paragraph_runs < 1:
        parser.error("--runs and --paragraph-runs must be at least 1")

    if args.child:
        serve_engine(args.child, args.config, args.voice)
        return

    from tests.support.voices_audio import write_voice_wav

    args.load_before = os.getloadavg()[0]  # other work on the machine moves every figure
    directory = checkpoint_directory(args)
    print(f"building / loading the random-weight {args.model} model in {directory} ...", flush=True)
    built = build_checkpoint(args)
    voice = write_voice_wav(directory / "voice0.wav", seconds=5.0, seed=0)
    log_path = Path(tempfile.gettempdir()) / "wyoming-pocket-tts-bench-server.log"
    server = LocalServer(["--model", str(built.config_path), "--voice", str(voice)], log_path)
    engines = [EngineChild(name, built.config_path, voice) for name in ("reference", "ours")]
    rounds: dict[str, list[dict]] = {"reference": [], "ours": [], "protocol": []}
    wyoming_bench = wyoming_bench_executable()
    if wyoming_bench is None:
        print(
            "wyoming-bench is not installed (the bench extra: pip install -e '.[bench]'): "
            "its rows are skipped"
        )
    try:
        asyncio.run(server.wait_ready())
        for index in range(max(args.runs, args.paragraph_runs)):
            measures = round_measures(index, args.runs, args.paragraph_runs)
            print(
                f"round {index + 1}: {', '.join(measures)} (server log: {log_path}) ...", flush=True
            )
            measured: dict[str, dict] = {name: {} for name in rounds}
            for name in measures:  # each on the three, one right after the other
                for engine in engines:
                    measured[engine.engine].update(engine.measure(name))
                measured["protocol"].update(asyncio.run(measure_protocol(server.port, name)))
                if wyoming_bench and name == "short":
                    try:
                        measured["protocol"].update(run_wyoming_bench(wyoming_bench, server.port))
                    except RuntimeError as err:
                        print(f"wyoming-bench failed {err}", flush=True)
                        wyoming_bench = None
            for name, results in measured.items():
                rounds[name].append(results)
    finally:
        for engine in engines:
            engine.close()
        server.stop()

    protocol, ours, reference = (
        medians(rounds[name]) for name in ("protocol", "ours", "reference")
    )
    print_table(protocol, ours, reference, args)


if __name__ == "__main__":
    main()
