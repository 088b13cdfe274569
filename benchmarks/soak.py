"""Soak test: many clients, many requests, and whether the server is the same at the end.

Drives a Wyoming server over loopback with `--clients` concurrent clients, each
making one request per connection as Home Assistant does, until `--requests` have
been made or `--seconds` have passed. The requests are a mix of what a server meets:

* synthesize: one `synthesize`, read to `audio-stop`;
* stream: Home Assistant's flow, `synthesize-start`, a `synthesize-chunk` per word,
  the whole text again as `synthesize`, `synthesize-stop`, read to `synthesize-stopped`;
* hang-up: a `synthesize` whose client closes the connection at the first audio;
* unknown-voice: a voice that does not exist (an `error` is the right answer);
* malformed: a line that is not an event, then a `describe` (an `error`, a closed
  connection or the `info` are all right answers);
* describe: a `describe`, timed.

Each speaking request picks a voice at random among more voices than the server
keeps loaded, so voices are evicted and loaded again all along. It prints the
requests served, the failures by kind, time to first audio (p50/p95/p99), Describe's
p99, and, read from /proc, the server's resident memory after the warm-up requests
and at the end, its open files and threads before and after. Memory is also sampled
all along: the lowest, median and highest of each hundred requests tell what the
server keeps between requests, its level, and what its busiest moments take.

After the warm-up the clients pause until the server has been idle for a few seconds,
and the run ends the same way: memory read once idle at both points compares what
the server keeps, free of whatever happens to be in flight when it is read.

By default it starts the server itself (`python -m wyoming_pocket_tts`) with the
random-weight model benchmarks/checkpoints.py builds, or the model `--config` names,
and a voices folder of generated recordings; `--uri` and `--pid` attach it to a
running server instead (its voices are those its Describe lists).

Usage: python benchmarks/soak.py [--requests 1000] [--clients 8] [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from wyoming.audio import AudioChunk, AudioStop
from wyoming.error import Error
from wyoming.event import Event, Eventable, async_read_event, async_write_event
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from benchmarks.checkpoints import add_checkpoint_arguments, build_checkpoint
from benchmarks.local_server import LocalServer

#: Request kinds and how often each comes, out of 100.
MIX = {
    "synthesize": 35,
    "stream": 30,
    "hang-up": 10,
    "unknown-voice": 5,
    "malformed": 5,
    "describe": 15,
}
#: Kinds whose right answer is an error: theirs are counted apart from failures.
BAD_REQUESTS = frozenset({"unknown-voice", "malformed"})
TEXTS = (
    "The living room lights are off.",
    "It is twenty one degrees in the kitchen.",
    "Turned on the bedroom fan.",
    "Your timer for ten minutes has started.",
    "The front door is locked and the garage door is closed.",
    "Tomorrow will be cloudy with a high of fourteen degrees and light rain in the afternoon.",
    "Playing your morning playlist in the living room.",
    "There are three items on your shopping list: milk, eggs and bread.",
)
REQUEST_TIMEOUT_S = 300.0
IDLE_S = 3.0  # longer than the worker waits before it gives free heap back
SETTLE_S = 10.0  # how long the server may take to let go of a finished request's threads
SAMPLE_S = 0.1  # how often resident memory is sampled during the run


@dataclass
class Outcome:
    kind: str
    ok: bool
    what: str  # "ok", or what went wrong (or, for a bad request, which right answer came)
    first_audio_s: float | None = None
    describe_s: float | None = None


@dataclass(frozen=True)
class ProcessState:
    rss_mib: float
    open_files: int
    threads: int


def process_state(pid: int) -> ProcessState:
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kib = _status_number(status, "VmRSS")
    threads = _status_number(status, "Threads")
    return ProcessState(rss_kib / 1024, len(os.listdir(f"/proc/{pid}/fd")), threads)


def _status_number(status: str, name: str) -> int:
    """The number on the `name:` line of a /proc/PID/status text."""
    match = re.search(rf"^{name}:\s+(\d+)", status, re.M)
    if match is None:
        raise RuntimeError(f"/proc status without {name}")
    return int(match[1])


# ---------------------------------------------------------------------------
# One request per connection


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self._address = (host, port)

    async def __aenter__(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection(*self._address)
        return self

    async def __aexit__(self, *_) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass

    async def send(self, *events: Event) -> None:
        for event in events:
            await async_write_event(event, self.writer)

    async def receive(self) -> Event | None:
        return await async_read_event(self.reader)


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


async def _read_audio(
    connection: Connection, kind: str, end_type: type[Eventable], started: float,
    hang_up: bool = False,
) -> Outcome:
    first = None
    while (event := await connection.receive()) is not None:
        if Error.is_type(event.type):
            return Outcome(kind, False, f"error: {Error.from_event(event).code}")
        if AudioChunk.is_type(event.type) and first is None:
            first = time.perf_counter() - started
            if hang_up:
                return Outcome(kind, True, "ok", first)
        elif end_type.is_type(event.type):
            if first is None:
                return Outcome(kind, False, "no audio")
            return Outcome(kind, True, "ok", first)
    return Outcome(kind, False, "closed early")


async def make_request(host: str, port: int, kind: str, voice: str, text: str) -> Outcome:
    async with Connection(host, port) as connection:
        started = time.perf_counter()
        chosen = SynthesizeVoice(name=voice)
        if kind in ("synthesize", "hang-up"):
            await connection.send(Synthesize(text=text, voice=chosen).event())
            return await _read_audio(connection, kind, AudioStop, started, kind == "hang-up")
        if kind == "stream":
            reading = asyncio.create_task(
                _read_audio(connection, kind, SynthesizeStopped, started)
            )
            await connection.send(
                SynthesizeStart(voice=chosen).event(),
                *(SynthesizeChunk(text=word).event() for word in _words(text)),
                Synthesize(text=text, voice=chosen).event(),
                SynthesizeStop().event(),
            )
            return await reading
        if kind == "unknown-voice":
            await connection.send(
                Synthesize(text=text, voice=SynthesizeVoice(name=f"no-such-{voice}")).event()
            )
            event = await connection.receive()
            if event is not None and Error.is_type(event.type):
                return Outcome(kind, True, "error")
            return Outcome(kind, False, f"answered {event.type if event else 'nothing'}")
        if kind == "malformed":
            connection.writer.write(b'{"type": "synthesize", "data": {"text": \n')
            await connection.send(Describe().event())
            event = await connection.receive()
            if event is None:
                return Outcome(kind, True, "closed")
            if Error.is_type(event.type) or Info.is_type(event.type):
                return Outcome(kind, True, event.type)
            return Outcome(kind, False, f"answered {event.type}")
        await connection.send(Describe().event())
        event = await connection.receive()
        if event is None or not Info.is_type(event.type):
            return Outcome(kind, False, f"answered {event.type if event else 'nothing'}")
        return Outcome(kind, True, "ok", describe_s=time.perf_counter() - started)


async def timed_request(host: str, port: int, kind: str, voice: str, text: str) -> Outcome:
    try:
        return await asyncio.wait_for(
            make_request(host, port, kind, voice, text), REQUEST_TIMEOUT_S
        )
    except TimeoutError:
        return Outcome(kind, False, "timeout")
    except (ConnectionError, asyncio.IncompleteReadError) as error:
        return Outcome(kind, False, f"connection: {type(error).__name__}")


async def server_voices(host: str, port: int) -> list[str]:
    async with Connection(host, port) as connection:
        await connection.send(Describe().event())
        event = await asyncio.wait_for(connection.receive(), REQUEST_TIMEOUT_S)
    assert event is not None and Info.is_type(event.type), "the server did not answer Describe"
    return sorted(voice.name for program in Info.from_event(event).tts for voice in program.voices)


# ---------------------------------------------------------------------------
# The run


@dataclass
class Results:
    requests: int = 0
    served: int = 0
    seconds: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)  # "kind: what" -> count
    bad_request_answers: dict[str, int] = field(default_factory=dict)
    first_audio_ms: dict[str, float] = field(default_factory=dict)  # p50, p95, p99
    describe_p99_ms: float | None = None
    before: ProcessState | None = None
    after_warm_up: ProcessState | None = None
    at_end: ProcessState | None = None
    settled: ProcessState | None = None
    idle_after_warm_up: ProcessState | None = None
    idle: ProcessState | None = None
    rss_mib_every_100: list[float] = field(default_factory=list)
    # The lowest, median and highest resident memory sampled during each 100 requests:
    # the low is what the server keeps between requests, the high its busiest moment,
    # and the median its level, which neither a heap trim nor a burst moves.
    rss_mib_range_per_100: list[tuple[float, float, float]] = field(default_factory=list)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def soak(args: argparse.Namespace, host: str, port: int, pid: int | None) -> Results:
    voices = await server_voices(host, port)
    rng = random.Random(args.seed)
    kinds = rng.choices(list(MIX), weights=list(MIX.values()), k=args.requests)
    results = Results(before=process_state(pid) if pid else None)
    outcomes: list[Outcome] = []
    deadline = time.monotonic() + args.seconds if args.seconds else None
    next_request = iter(kinds)  # shared by the clients: each takes the next one
    started = time.monotonic()
    window: list[float] = []  # memory sampled during the hundred requests under way
    running = asyncio.Event()  # cleared while the clients wait for the server to idle
    running.set()
    in_flight = 0

    def close_window() -> None:
        if window:
            low, middle, high = (percentile(window, q) for q in (0, 0.5, 1))
            results.rss_mib_range_per_100.append((round(low, 1), round(middle, 1), round(high, 1)))
        window.clear()

    async def idle_pause(pid: int) -> None:
        while in_flight:
            await asyncio.sleep(0.05)
        await asyncio.sleep(IDLE_S)
        results.idle_after_warm_up = process_state(pid)
        running.set()

    async def client() -> None:
        nonlocal in_flight
        for kind in next_request:
            await running.wait()
            if deadline is not None and time.monotonic() > deadline:
                return
            in_flight += 1
            try:
                outcome = await timed_request(
                    host, port, kind, rng.choice(voices), rng.choice(TEXTS)
                )
            finally:
                in_flight -= 1
            outcomes.append(outcome)
            if pid and len(outcomes) % 100 == 0:
                state = process_state(pid)
                results.rss_mib_every_100.append(round(state.rss_mib, 1))
                window.append(state.rss_mib)
                close_window()
            if pid and len(outcomes) == args.warm_up:
                results.after_warm_up = process_state(pid)
                running.clear()
                pauses.append(asyncio.create_task(idle_pause(pid)))

    async def sample_memory(pid: int) -> None:
        while True:
            if running.is_set():
                window.append(process_state(pid).rss_mib)
            await asyncio.sleep(SAMPLE_S)

    pauses: list[asyncio.Task] = []
    sampler = asyncio.create_task(sample_memory(pid)) if pid else None
    await asyncio.gather(*(client() for _ in range(args.clients)))
    await asyncio.gather(*pauses)
    results.seconds = time.monotonic() - started
    if sampler is not None:
        sampler.cancel()
    if pid and results.before is not None:
        results.at_end = process_state(pid)
        results.settled = await settle(pid, results.before)
        await asyncio.sleep(IDLE_S)
        results.idle = process_state(pid)
    summarize(outcomes, results)
    return results


async def settle(pid: int, before: ProcessState) -> ProcessState:
    """The server's state once its open files and threads are back to what they were
    before the run, or after SETTLE_S (a finished request's threads end soon after)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        state = process_state(pid)
        if state.open_files <= before.open_files and state.threads <= before.threads:
            return state
        if time.monotonic() > deadline:
            return state
        await asyncio.sleep(0.2)


def summarize(outcomes: list[Outcome], results: Results) -> None:
    results.requests = len(outcomes)
    results.served = sum(outcome.ok for outcome in outcomes)
    results.failures = dict(
        Counter(f"{o.kind}: {o.what}" for o in outcomes if not o.ok).most_common()
    )
    results.bad_request_answers = dict(
        Counter(f"{o.kind}: {o.what}" for o in outcomes if o.ok and o.kind in BAD_REQUESTS)
    )
    first_audio = [o.first_audio_s for o in outcomes if o.first_audio_s is not None]
    if first_audio:
        results.first_audio_ms = {
            f"p{round(100 * q)}": round(1000 * percentile(first_audio, q), 1)
            for q in (0.5, 0.95, 0.99)
        }
    describes = [o.describe_s for o in outcomes if o.describe_s is not None]
    if describes:
        results.describe_p99_ms = round(1000 * percentile(describes, 0.99), 1)


def report(results: Results, args: argparse.Namespace) -> None:
    print(f"requests: {results.requests} in {results.seconds:.0f} s, {args.clients} clients")
    print(f"served as expected: {results.served}")
    print(f"failures: {results.failures or 'none'}")
    print(f"bad requests answered: {results.bad_request_answers or 'none'}")
    print(f"time to first audio (ms): {results.first_audio_ms}")
    print(f"Describe p99 (ms): {results.describe_p99_ms}")
    for label, state in (
        ("before", results.before),
        (f"after {args.warm_up} requests", results.after_warm_up),
        (f"idle after {args.warm_up} requests", results.idle_after_warm_up),
        ("at the end", results.at_end),
        ("settled", results.settled),
        (f"idle {IDLE_S:.0f} s later", results.idle),
    ):
        if state is not None:
            print(
                f"server {label}: {state.rss_mib:.1f} MiB resident, "
                f"{state.open_files} open files, {state.threads} threads"
            )
    if results.after_warm_up and results.at_end:
        growth = results.at_end.rss_mib / results.after_warm_up.rss_mib - 1
        print(f"resident memory since the warm-up: {100 * growth:+.1f}%")
    if results.idle_after_warm_up and results.idle:
        kept, now = results.idle_after_warm_up.rss_mib, results.idle.rss_mib
        print(f"resident memory once idle, after the warm-up and at the end: "
              f"{kept:.1f} -> {now:.1f} MiB ({100 * (now / kept - 1):+.1f}%)")
    if results.rss_mib_every_100:
        print(f"resident memory every 100 requests (MiB): {results.rss_mib_every_100}")
    ranges = results.rss_mib_range_per_100
    if ranges:
        print("resident memory during each 100 requests, lowest/median/highest (MiB): "
              + ", ".join("/".join(f"{value:.0f}" for value in summary) for summary in ranges))
    if len(ranges) > 2:  # the first hundred is the warm-up
        low, middle, high = (ranges[-1][i] / ranges[1][i] - 1 for i in range(3))
        print(f"from the second hundred to the last: lowest {100 * low:+.1f}%, "
              f"median {100 * middle:+.1f}%, highest {100 * high:+.1f}%")


# ---------------------------------------------------------------------------
# A server of our own


def write_voices(folder: Path, count: int, seed: int) -> Path:
    """`count` speech-like recordings of 3-6 s, each a different voice."""
    from tests.support.voices_audio import write_voice_wav

    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for index in range(count):
        write_voice_wav(folder / f"voice{index:02d}.wav", seconds=rng.uniform(3, 6), seed=index)
    return folder / "voice00.wav"


def start_server(args: argparse.Namespace, config: Path, directory: Path) -> LocalServer:
    """The server with a voices folder of generated recordings, its log in `directory`."""
    default = write_voices(directory / "voices", args.voices, args.seed)
    return LocalServer(
        [
            "--model", str(config),
            "--voice", str(default),
            "--voices-dir", str(default.parent),
            "--max-loaded-voices", str(args.max_loaded_voices),
            *(["--eos-threshold", str(args.eos_threshold)] if args.eos_threshold else []),
            *(["--quantize"] if args.quantize else []),
        ],
        directory / "server.log",
    )  # fmt: skip


def parse_uri(uri: str) -> tuple[str, int]:
    parsed = urlparse(uri)
    if parsed.scheme != "tcp" or parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"--uri {uri}: only a loopback tcp:// server can be soaked")
    if parsed.port is None:
        raise SystemExit(f"--uri {uri}: give the server's port")
    return parsed.hostname, parsed.port


async def run(args: argparse.Namespace) -> Results:
    if args.uri:
        host, port = parse_uri(args.uri)
        return await soak(args, host, port, args.pid)
    config = args.config or build_checkpoint(args).config_path
    directory = Path(tempfile.mkdtemp(prefix="soak-"))
    server = start_server(args, config, directory)
    try:
        await server.wait_ready()
        results = await soak(args, "127.0.0.1", server.port, server.process.pid)
    finally:
        code = server.stop()
    log = server.log_path.read_text(errors="replace")
    if code != 0 or "Traceback" in log:
        print(f"the server exited with {code}; its log:\n{log[-5000:]}", file=sys.stderr)
        results.failures["server: exit or traceback"] = 1
    if args.keep:
        print(f"the server's log and voices: {directory}")
    else:
        shutil.rmtree(directory, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_checkpoint_arguments(parser)
    parser.add_argument("--config", type=Path, help="a model YAML to serve instead of --model's")
    parser.add_argument("--uri", help="soak this running server (tcp://127.0.0.1:PORT) instead")
    parser.add_argument("--pid", type=int, help="the running server's process, for /proc")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--seconds", type=float, help="stop making requests after this long")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--voices", type=int, default=12, help="recordings in the voices folder")
    parser.add_argument("--max-loaded-voices", type=int, default=4)
    parser.add_argument(
        "--eos-threshold", type=float, default=-1000.0,
        help="the server's end-of-speech threshold: a random-weight model never ends "
        "speech on its own, so the default ends each sentence at its fewest frames "
        "(0: the model's)",
    )  # fmt: skip
    parser.add_argument("--quantize", action="store_true", help="soak an int8 server")
    parser.add_argument("--warm-up", type=int, default=100, help="requests before memory is read")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the server's log and voices")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.requests < 1 or args.clients < 1:
        parser.error("--requests and --clients must be at least 1")
    results = asyncio.run(run(args))
    report(results, args)
    if args.json:
        args.json.write_text(json.dumps(asdict(results), indent=2))


if __name__ == "__main__":
    main()
