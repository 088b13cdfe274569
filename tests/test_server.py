"""The Wyoming server as Home Assistant sees it: a real subprocess, the real protocol.

Each server runs the tiny random-weight model. With `--eos-threshold -1000` the model
ends every chunk right after the minimum number of frames (short, fast audio); without
it the end of speech never comes and a text runs to its length limit (long audio, for
tests about concurrency and cancellation).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, read_event, write_event
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from tests.support.reference_model import BuiltModel
from tests.support.server import (
    FRAME_BYTES,
    LONG_TEXT,
    REPO,
    SHORT,
    TIMEOUT,
    AudioStream,
    ServerProcess,
    assert_pcm_frames,
    describe,
    event_types_until_close,
    free_port,
    launch,
    on_cores,
    read_audio,
    run,
    synthesize,
)
from wyoming_pocket_tts.engine.cpu.quantize import int8_backend


@pytest.fixture(scope="module")
def voices_dir(
    tmp_path_factory: pytest.TempPathFactory, voice_wav: Path, other_voice_wav: Path
) -> Path:
    directory = tmp_path_factory.mktemp("custom-voices")
    for name in ("alba", "bob", "dave"):
        shutil.copy(voice_wav, directory / f"{name}.wav")
    shutil.copy(other_voice_wav, directory / "carol.wav")
    return directory


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_model, voice_wav, voices_dir) -> Iterator[ServerProcess]:
    """Short utterances; voices: `voice` (the default) plus alba, bob, carol, dave; at
    most two loaded at once, so every switch between non-default voices evicts one; a
    connection idle for 3 s is closed, a text stream that owes text for 6 s too;
    temperature 0, so the audio of a text is known."""
    process = launch(
        tmp_path_factory.mktemp("server"),
        tiny_model,
        "--voice",
        str(voice_wav),
        "--voices-dir",
        str(voices_dir),
        "--max-loaded-voices",
        "2",
        "--idle-timeout",
        "3",
        "--stream-timeout",
        "6",
        "--temperature",
        "0",
        "--debug",
        *SHORT,
    )
    yield process
    assert process.stop() == 0, process.log()
    assert "Traceback" not in process.log()


@pytest.fixture(scope="module")
def long_server(tmp_path_factory, tiny_model, voice_wav) -> Iterator[ServerProcess]:
    """No end of speech: every text runs to its frame limit."""
    process = launch(
        tmp_path_factory.mktemp("long-server"), tiny_model, "--voice", str(voice_wav), "--debug"
    )
    yield process
    assert process.stop() == 0, process.log()
    assert "Traceback" not in process.log()



# ---------------------------------------------------------------------------
# Info


def test_info_describes_the_program_and_every_voice(server):
    async def scenario():
        async with server.client() as client:
            return await describe(client)

    info = run(scenario())
    (program,) = info.tts
    assert program.name == "pocket-tts"
    assert program.attribution.name == "Kyutai"
    assert program.installed and program.version
    assert program.supports_synthesize_streaming
    assert sorted(voice.name for voice in program.voices) == [
        "alba",
        "bob",
        "carol",
        "dave",
        "voice",
    ]
    for voice in program.voices:
        assert voice.installed
        assert voice.languages == ["en"]
        assert voice.description


def test_a_voice_file_added_at_run_time_is_listed_and_usable(server, voices_dir, voice_wav):
    added = voices_dir / "erin.wav"

    async def names():
        async with server.client() as client:
            return [voice.name for voice in (await describe(client)).tts[0].voices]

    assert "erin" not in run(names())
    shutil.copy(voice_wav, added)
    try:
        assert "erin" in run(names())
        assert_pcm_frames(run(synthesize(server, "Hello from a new voice.", voice="erin")))
    finally:
        added.unlink()
    assert "erin" not in run(names())


# ---------------------------------------------------------------------------
# Synthesize


def test_synthesize_streams_one_chunk_per_frame_and_logs_the_request(server):
    stream = run(synthesize(server, "The kitchen light is on."))

    assert_pcm_frames(stream)
    assert stream.stop.data.get("timestamp") == len(stream.chunks) * 80
    server.wait_for_log("chars=24")
    line = next(line for line in server.log().splitlines() if "chars=24" in line)
    assert "INFO" in line and "voice=voice" in line and "first_audio=" in line and "rtf=" in line


def test_the_server_and_the_synthesize_command_give_the_same_samples(
    tmp_path, tiny_model, voice_wav
):
    """One conversion from the model's float audio to 16-bit samples for both, and audio
    that does not depend on how each process's worker happened to group frames into
    decoder calls. On one core: oneDNN may split the sums of the tiny model's layers
    between threads."""
    one_core = on_cores({min(os.sched_getaffinity(0))})
    text = "The kitchen light is on."
    output = tmp_path / "speech.wav"
    done = subprocess.run(
        [sys.executable, *one_core, "synthesize", "--model",
         str(tiny_model.config_path), "--voice", str(voice_wav), "--text", text,
         "--output", str(output), "--temperature", "0", *SHORT, "--quiet"],
        cwd=REPO, check=False, capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    with wave.open(str(output)) as wav:
        written = wav.readframes(wav.getnframes())
    process = launch(
        tmp_path / "server", tiny_model, "--voice", str(voice_wav), "--temperature", "0",
        *SHORT, program=one_core,
    )
    try:
        served = b"".join(chunk.audio for chunk in run(synthesize(process, text)).chunks)
    finally:
        process.stop()
    assert len(written) > 0
    assert served == written


@pytest.mark.skipif(int8_backend() is None, reason="no int8 engine in this PyTorch build")
def test_a_quantized_server_speaks_and_says_so(tmp_path, tiny_model, voice_wav):
    """`--quantize` end to end: the int8 layers serve over the protocol."""
    process = launch(tmp_path, tiny_model, "--voice", str(voice_wav), "--quantize", *SHORT)
    try:
        stream = run(synthesize(process, "The kitchen light is on."))
        assert_pcm_frames(stream)
        assert "quantized to int8" in process.log()
    finally:
        assert process.stop() == 0, process.log()
    assert "Traceback" not in process.log()


def test_the_server_leaves_its_start_up_objects_out_of_garbage_collection(server):
    found = re.search(r"(\d+) start-up objects kept out of garbage collection", server.log())
    assert found, server.log()
    assert int(found[1]) > 10_000  # torch's modules alone are more


def test_audio_start_leaves_with_the_first_chunk_in_one_segment(server):
    """Each wake-up of the client takes a core from the engine on a small machine: the
    first thing the client receives is AudioStart and the whole first chunk at once."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        sock.sendall(wire(Synthesize(text="The kitchen light is on.").event()))
        received = io.BytesIO(sock.recv(1 << 16))
    first = read_event(received)
    second = read_event(received)
    assert first is not None and first.type == "audio-start"
    assert second is not None and AudioChunk.is_type(second.type)
    assert len(second.payload) == 2 * 1920  # one whole 80 ms frame of 16-bit samples


@pytest.mark.parametrize("text", ["", "   \n ", "\u3000\u00a0"])
def test_text_with_nothing_to_say_gets_a_moment_of_silence(server, text):
    """Home Assistant converts whatever audio it gets: zero bytes of it fail there."""
    stream = run(synthesize(server, text))
    assert (stream.start.rate, stream.start.width, stream.start.channels) == (24000, 2, 1)
    (chunk,) = stream.chunks
    assert chunk.audio == bytes(FRAME_BYTES)
    assert stream.stop.data.get("timestamp") == 80


@pytest.mark.wall_clock
def test_audio_is_sent_while_the_text_is_still_being_synthesized(long_server):
    async def scenario():
        async with long_server.client() as client:
            sent = time.monotonic()
            await client.write_event(Synthesize(text=LONG_TEXT).event())
            arrivals = []
            stream = await read_audio_timed(client, arrivals)
            return sent, arrivals, time.monotonic(), stream

    sent, arrivals, stopped, stream = run(scenario())
    assert_pcm_frames(stream)
    assert len(stream.chunks) > 50
    # A server that synthesized first and sent afterwards would deliver every chunk in
    # a burst at the end; streaming spreads them over the synthesis.
    assert stopped - arrivals[0] > 0.5 * (stopped - sent)


async def read_audio_timed(client: AsyncTcpClient, arrivals: list[float]) -> AudioStream:
    """`read_audio`, noting when each chunk arrived."""
    event = await client.read_event()
    assert event is not None and AudioStart.is_type(event.type)
    start, chunks = AudioStart.from_event(event), []
    while (event := await client.read_event()) is not None and AudioChunk.is_type(event.type):
        arrivals.append(time.monotonic())
        chunks.append(AudioChunk.from_event(event))
    assert event is not None and event.type == "audio-stop"
    return AudioStream(start, chunks, event)


# ---------------------------------------------------------------------------
# Streaming, exactly as Home Assistant drives it


def test_streaming_flow_speaks_each_sentence_as_it_completes(server):
    async def scenario():
        async with server.client() as client:
            await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="voice")).event())
            for piece in ["The kitchen ", "light is on.", " The"]:
                await client.write_event(SynthesizeChunk(text=piece).event())
            # The first sentence is complete: its audio comes before any more text.
            first = await read_audio(client)
            for piece in [" front door is locked. ", "Goodnight."]:
                await client.write_event(SynthesizeChunk(text=piece).event())
            full = "The kitchen light is on. The front door is locked. Goodnight."
            await client.write_event(
                Synthesize(text=full, voice=SynthesizeVoice(name="voice")).event()
            )
            await client.write_event(SynthesizeStop().event())
            rest = [await read_audio(client), await read_audio(client)]
            stopped = await client.read_event()
            return first, rest, stopped

    first, rest, stopped = run(scenario())
    for stream in (first, *rest):
        assert_pcm_frames(stream)
    assert stopped is not None and stopped.type == "synthesize-stopped"
    server.wait_for_log("stream: voice=voice chars=")


def test_streamed_text_without_sentence_end_is_spoken_at_stop(server):
    async def scenario():
        async with server.client() as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text="turn on the lights").event())
            await client.write_event(SynthesizeStop().event())
            stream = await read_audio(client)
            stopped = await client.read_event()
            return stream, stopped

    stream, stopped = run(scenario())
    assert_pcm_frames(stream)
    assert stopped is not None and stopped.type == "synthesize-stopped"


def test_a_stream_of_nothing_still_ends_with_synthesize_stopped(server):
    async def scenario():
        async with server.client() as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text="  ").event())
            await client.write_event(SynthesizeStop().event())
            return await read_audio(client), await client.read_event()

    silence, stopped = run(scenario())
    assert [chunk.audio for chunk in silence.chunks] == [bytes(FRAME_BYTES)]
    assert stopped is not None and stopped.type == "synthesize-stopped"


# ---------------------------------------------------------------------------
# Concurrency


@pytest.mark.wall_clock
def test_describe_is_answered_at_once_while_another_connection_synthesizes(long_server):
    async def scenario():
        async with long_server.client() as busy, long_server.client() as asker:
            # Four chunks: still speaking after the measurement on a fast machine too.
            await busy.write_event(Synthesize(text=" ".join([LONG_TEXT] * 4)).event())
            event = await busy.read_event()
            assert event is not None and AudioStart.is_type(event.type)
            reader = asyncio.create_task(drain(busy))
            await asyncio.sleep(0.3)  # let frames flow: the worker is busy now
            delays = []
            for _ in range(5):
                started = time.monotonic()
                await describe(asker)
                delays.append(time.monotonic() - started)
                await asyncio.sleep(0.05)
            assert not reader.done(), "synthesis ended before the measurement: use a longer text"
            reader.cancel()  # leaving disconnects, which ends the synthesis
            return sorted(delays)

    delays = run(scenario())
    # Home Assistant waits a second or more; at once means a small part of that.
    assert delays[len(delays) // 2] < 0.5, delays


async def drain(client: AsyncTcpClient) -> int:
    """Read audio until AudioStop; the number of chunks."""
    chunks = 0
    while (event := await client.read_event()) is not None:
        if event.type == "audio-stop":
            return chunks
        chunks += AudioChunk.is_type(event.type)
    raise AssertionError("connection closed before audio-stop")


def test_a_short_request_finishes_while_a_long_one_is_still_going(long_server):
    async def scenario():
        async with long_server.client() as long_client, long_server.client() as short_client:
            await long_client.write_event(Synthesize(text=LONG_TEXT).event())
            event = await long_client.read_event()
            assert event is not None and AudioStart.is_type(event.type)
            long_reader = asyncio.create_task(drain(long_client))
            await short_client.write_event(Synthesize(text="Yes.").event())
            short_stream = await read_audio(short_client)
            long_done_first = long_reader.done()
            long_chunks = await long_reader
            return short_stream, long_done_first, long_chunks

    short_stream, long_done_first, long_chunks = run(scenario())
    assert_pcm_frames(short_stream)
    assert not long_done_first
    assert long_chunks > len(short_stream.chunks)


@pytest.mark.wall_clock
def test_a_disconnect_cancels_the_synthesis(long_server):
    async def scenario():
        client = long_server.client()
        await client.connect()
        await client.write_event(Synthesize(text=LONG_TEXT * 3).event())
        for _ in range(3):  # AudioStart and the first chunks
            assert await client.read_event() is not None
        await client.disconnect()

    dropped = long_server.log().count("the worker has dropped the cancelled synthesis")
    run(scenario())
    # A job nobody reads pauses anyway; a cancelled one leaves the worker.
    deadline = time.monotonic() + 30
    while long_server.log().count("the worker has dropped the cancelled synthesis") == dropped:
        assert time.monotonic() < deadline, "the cancelled job is still in the worker"
        time.sleep(0.05)
    before = long_server.cpu_seconds()
    time.sleep(1.0)
    used = long_server.cpu_seconds() - before
    # Still synthesizing would keep a core busy (~1 s of CPU per second).
    assert used < 0.5, f"server used {used:.2f} s of CPU in the second after the disconnect"
    # The request still has its line in the log, saying how it ended.
    line = [line for line in long_server.log().splitlines() if "(cut short:" in line][-1]
    assert line.startswith("INFO") and "synthesize: voice=voice" in line, line

    async def still_serving():
        async with long_server.client() as client:
            return await describe(client)

    assert run(still_serving()).tts


def test_a_slow_reader_pauses_synthesis_instead_of_buffering(long_server):
    text = f"{LONG_TEXT} {LONG_TEXT}"  # two chunks, about 330 frames

    async def scenario():
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", long_server.port))
        client = long_server.client()
        # The library's client, on a socket with a small receive window.
        client._reader, client._writer = await asyncio.open_connection(sock=sock)
        requested = long_server.cpu_seconds()
        await client.write_event(Synthesize(text=text).event())
        # Not reading: once the buffers on the way are full the server must go idle,
        # long before the utterance is done.
        deadline = time.monotonic() + TIMEOUT
        while True:
            before = long_server.cpu_seconds()
            await asyncio.sleep(0.5)
            if long_server.cpu_seconds() - before < 0.05:
                break
            assert time.monotonic() < deadline, "the server never paused"
        # Reading again: synthesis resumes and every frame arrives.
        before = long_server.cpu_seconds()
        assert (await client.read_event()).type == "audio-start"
        chunks = await drain(client)
        resumed_cpu = long_server.cpu_seconds() - before
        await client.disconnect()
        return chunks, before - requested, resumed_cpu

    chunks, paused_cpu, resumed_cpu = run(scenario())
    assert chunks > 250
    # Had the server finished instead of pausing, draining would cost it no synthesis.
    # Relative to the work done before the pause, not in seconds: a fast CPU does all
    # of it in well under a second.
    assert resumed_cpu > paused_cpu, (
        f"{resumed_cpu:.2f} s of CPU after reading resumed, {paused_cpu:.2f} s before the pause"
    )


# ---------------------------------------------------------------------------
# The voice store through the protocol


def loads(server: ServerProcess, name: str) -> int:
    return server.log().count(f"Loading voice {name} ")


def test_least_recently_used_voice_is_evicted_and_the_default_stays(server):
    bob_loads = loads(server, "bob")
    run(synthesize(server, "One two three.", voice="bob"))
    run(synthesize(server, "One two three.", voice="bob"))
    assert loads(server, "bob") == bob_loads + 1  # loaded once, then reused
    run(synthesize(server, "One two three.", voice="carol"))  # bound 2: bob goes
    server.wait_for_log("Unloaded voice bob")
    run(synthesize(server, "One two three.", voice="bob"))
    assert loads(server, "bob") == bob_loads + 2
    run(synthesize(server, "One two three."))
    assert "Unloaded voice voice" not in server.log()
    assert loads(server, "voice") == 1  # loaded at startup, pinned since


def test_two_requests_for_one_unloaded_voice_load_it_once(server):
    before = loads(server, "dave")

    async def scenario():
        return await asyncio.gather(
            synthesize(server, "One two three.", voice="dave"),
            synthesize(server, "Four five six.", voice="dave"),
        )

    for stream in run(scenario()):
        assert_pcm_frames(stream)
    assert loads(server, "dave") == before + 1


def test_an_unknown_voice_gets_an_error_naming_it_then_the_connection_closes(server):
    async def scenario():
        async with server.client() as client:
            await client.write_event(
                Synthesize(text="Hello there.", voice=SynthesizeVoice(name="nobody")).event()
            )
            error = await client.read_event()
            after = await client.read_event()
            return error, after

    error, after = run(scenario())
    assert error is not None and Error.is_type(error.type)
    text = Error.from_event(error).text
    assert "nobody" in text and "alba, bob, carol, dave, voice" in text
    assert after is None  # closed: Home Assistant would otherwise wait forever


def test_an_unknown_voice_in_a_stream_is_reported_at_start(server):
    async def scenario():
        async with server.client() as client:
            await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="nobody")).event())
            return await client.read_event(), await client.read_event()

    error, after = run(scenario())
    assert (
        error is not None and Error.is_type(error.type) and "nobody" in Error.from_event(error).text
    )
    assert after is None


def test_an_unreadable_voice_file_gets_an_error_and_the_server_carries_on(server, voices_dir):
    broken = voices_dir / "broken.wav"
    broken.write_bytes(b"RIFF but not really a wave file")

    async def scenario():
        async with server.client() as client:
            await client.write_event(
                Synthesize(text="Hello there.", voice=SynthesizeVoice(name="broken")).event()
            )
            return await client.read_event(), await client.read_event()

    try:
        error, after = run(scenario())
    finally:
        broken.unlink()
    assert error is not None and Error.is_type(error.type)
    assert "broken.wav" in Error.from_event(error).text
    assert after is None
    assert_pcm_frames(run(synthesize(server, "Still here?")))


# ---------------------------------------------------------------------------
# Bad input: one log line, the connection handled, the server and others unaffected


def raw_exchange(server: ServerProcess, data: bytes, then_describe: bool = True) -> list[dict]:
    """Send raw bytes (then a Describe) and return the headers of all events received
    until the server closes the connection or answers the Describe."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        sock.sendall(data)
        if then_describe:
            sock.sendall(b'{"type": "describe"}\n')
        stream = sock.makefile("rb")
        received = []
        while (event := read_event(stream)) is not None:
            received.append({"type": event.type, **event.data})
            if event.type == "info":
                break
        return received


def types(events: list[dict]) -> list[str]:
    return [event["type"] for event in events]


def header(event_type: str, **fields) -> bytes:
    return json.dumps({"type": event_type, **fields}).encode() + b"\n"


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(b"this is not json\n", id="malformed-line"),
        pytest.param(b"[1, 2, 3]\n", id="json-not-an-object"),
        pytest.param(b'{"data": {}}\n', id="no-type"),
        pytest.param(b'{"type": "descr\xff\xfeibe"}\n', id="invalid-utf8-header"),
        pytest.param(header("synthesize", data_length=8) + b'{"t\xffxt"}', id="invalid-utf8-data"),
        pytest.param(
            header("synthesize-chunk", data={"text": "Hello there."}), id="chunk-without-start"
        ),
        pytest.param(header("no-such-event", data={"x": 1}), id="unknown-event"),
        pytest.param(
            header("ping-pong", payload_length=4) + b"\x00\x01\x02\x03", id="unknown-event-payload"
        ),
    ],
)
def test_a_skippable_bad_event_is_ignored_and_the_connection_carries_on(server, garbage):
    assert types(raw_exchange(server, garbage)) == ["info"]


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(header("synthesize", data_length=2_000_000), id="data-over-1MB"),
        pytest.param(header("synthesize", payload_length=50_000_000), id="payload-over-1MB"),
        pytest.param(header("synthesize", data_length=-5), id="negative-length"),
        pytest.param(header("synthesize", data_length="lots"), id="length-not-a-number"),
        pytest.param(b'{"type": "' + b"x" * 100_000 + b'"}\n', id="header-line-too-long"),
        pytest.param(header("synthesize", data={"text": 42}), id="text-not-a-string"),
        pytest.param(
            header("synthesize", data={"text": "Hi there.", "voice": "alba"}),
            id="voice-not-an-object",
        ),
    ],
)
def test_unreadable_input_gets_an_error_and_the_connection_closes(server, garbage):
    received = raw_exchange(server, garbage)
    assert types(received) == ["error"]
    assert received[0]["text"]


def test_a_flood_of_requests_is_refused_beyond_the_queue_limit(server):
    flood = b"".join(wire(Synthesize(text="One two three.").event()) for _ in range(20))
    received = raw_exchange(server, flood, then_describe=False)
    assert types(received)[-1] == "error"
    assert "requests waiting" in received[-1]["text"]


@pytest.mark.parametrize(
    "nested",
    [
        pytest.param(b"[" * 30_000 + b"\n", id="header"),
        pytest.param(header("synthesize", data_length=30_000) + b"[" * 30_000, id="data"),
    ],
)
def test_deeply_nested_json_is_one_bad_event_without_a_traceback(server, nested):
    assert types(raw_exchange(server, nested)) == ["info"]
    assert "Traceback" not in server.log() and "RecursionError" not in server.log()


def test_a_flood_of_bad_lines_is_cut_short_with_an_error(server):
    """100 KB of newlines: a few log lines and an error, not a line per newline."""
    lines_before = len(server.log().splitlines())
    received = raw_exchange(server, b"\n" * 100_000, then_describe=False)
    assert types(received) == ["error"] and "bad events" in received[0]["text"]
    server.wait_for_log("bad events; the last")
    assert len(server.log().splitlines()) - lines_before < 10


def test_text_over_the_limit_gets_an_error_naming_it_then_a_close(server):
    long = "word " * 2_001  # over the default 10,000 characters
    stream = [SynthesizeStart().event()] + [
        SynthesizeChunk(text=long[i : i + 2_000]).event() for i in range(0, len(long), 2_000)
    ]
    for events in ([Synthesize(text=long).event()], stream):
        received = raw_exchange(server, b"".join(wire(e) for e in events), then_describe=False)
        assert types(received)[-1] == "error"
        assert "--max-text-chars" in received[-1]["text"]


def test_a_half_sent_event_is_given_up_on_after_the_idle_timeout(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        sock.sendall(b'{"type": "descr')
        stream = sock.makefile("rb")
        error = read_event(stream)
        assert error is not None and error.type == "error" and "stalled" in error.data["text"]
        assert read_event(stream) is None  # closed


def test_a_connection_with_nothing_to_do_is_closed_after_the_idle_timeout(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        assert sock.recv(1) == b""  # closed without a word


def test_an_open_stream_that_sends_no_more_text_is_closed_after_the_stream_timeout(server):
    """Its sentence is spoken; then the idle timeout (3 s) does not apply, since a
    language model may pause between sentences, but the stream timeout (6 s) does."""

    async def scenario():
        async with server.client() as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text="The kitchen light is on. The").event())
            spoken = await read_audio(client)
            silent_since = time.monotonic()
            rest = await event_types_until_close(client._reader)
            return spoken, rest, time.monotonic() - silent_since

    spoken, rest, silent_for = run(scenario())
    assert_pcm_frames(spoken)
    assert rest == []  # closed: the client is gone or stuck, nothing more comes
    assert 5 < silent_for < 30
    server.wait_for_log("the text stream sent nothing for 6 s")


def test_a_stream_whose_text_keeps_coming_outlives_the_stream_timeout(server):
    async def scenario():
        async with server.client() as client:
            await client.write_event(SynthesizeStart().event())
            started = time.monotonic()
            for word in ["Good", "night", "to", "you", "all."]:  # 8 s in all, 2 s apart
                await client.write_event(SynthesizeChunk(text=f"{word} ").event())
                await asyncio.sleep(2)
            await client.write_event(SynthesizeStop().event())
            spoken = await read_audio(client)
            return spoken, await client.read_event(), time.monotonic() - started

    spoken, stopped, lasted = run(scenario())
    assert lasted > 6
    assert_pcm_frames(spoken)
    assert stopped is not None and stopped.type == "synthesize-stopped"


def test_debug_logs_connections_and_describe(server):
    async def scenario():
        async with server.client() as client:
            await describe(client)
            return client._writer.get_extra_info("sockname")

    host, port = run(scenario())[:2]
    server.wait_for_log(f"{host}:{port}: disconnected")
    assert f"{host}:{port}: connected" in server.log()
    assert f"{host}:{port}: describe" in server.log()


def test_a_connection_reset_mid_stream_leaves_the_server_serving(server, long_server):
    for target in (server, long_server):
        sock = socket.create_connection(("127.0.0.1", target.port), timeout=TIMEOUT)
        sock.sendall(wire(Synthesize(text=LONG_TEXT).event()))
        sock.recv(4096)  # audio has started
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # RST instead of FIN
        assert_pcm_frames(run(synthesize(target, "Still here?")))


def wire(event: Event) -> bytes:
    buffer = io.BytesIO()
    write_event(event, buffer)
    return buffer.getvalue()


def test_bad_input_on_one_connection_does_not_disturb_another(server):
    async def scenario():
        async with server.client() as client:
            await client.write_event(Synthesize(text="The kitchen light is on.").event())
            event = await client.read_event()
            assert event is not None and AudioStart.is_type(event.type)
            raw_exchange(server, header("synthesize", data_length=2_000_000))
            raw_exchange(server, b"\xff\xfe garbage\n")
            chunks = await drain(client)
            return chunks

    assert run(scenario()) > 0


# ---------------------------------------------------------------------------
# Custom voice folders: cached encodings, unusable recordings, names that are paths


def test_a_recording_is_encoded_once_however_often_it_is_loaded(server, voices_dir):
    for voice in ("carol", "dave", "carol", "dave"):  # bound 2 with the default: reloads
        assert_pcm_frames(run(synthesize(server, "One two three.", voice=voice)))
    assert loads(server, "carol") >= 2
    assert server.log().count("Voice carol.wav encoded and cached") == 1
    cached = sorted(path.name for path in (voices_dir / ".pocket-tts-cache").iterdir())
    assert any(name.startswith("carol.") and name.endswith(".safetensors") for name in cached)
    assert not [name for name in cached if not name.endswith(".safetensors")]


async def error_for(server: ServerProcess, voice: str) -> tuple[str, Event | None]:
    """The Error text a request with `voice` gets, and what follows it (None: closed)."""
    async with server.client() as client:
        await client.write_event(
            Synthesize(text="Hello there.", voice=SynthesizeVoice(name=voice)).event()
        )
        error = await client.read_event()
        assert error is not None and Error.is_type(error.type), error
        return Error.from_event(error).text, await client.read_event()


def test_unusable_recordings_get_an_error_saying_why(server, voices_dir):
    import numpy as np
    import soundfile

    silent, short, garbage = (voices_dir / name for name in ("hush.wav", "blip.flac", "junk.mp3"))
    soundfile.write(str(silent), np.zeros(24000, dtype=np.float32), 24000)
    soundfile.write(str(short), np.full(1000, 0.3, dtype=np.float32), 24000)
    garbage.write_bytes(b"ID3 this is no mp3" * 20)
    try:
        for voice, file_name, reason in [
            ("hush", "hush.wav", "silent"),
            ("blip", "blip.flac", "shorter than one frame"),
            ("junk", "junk.mp3", "cannot decode"),
        ]:
            text, after = run(error_for(server, voice))
            assert f"voice {voice} ({file_name})" in text and reason in text, text
            assert after is None
    finally:
        for path in (silent, short, garbage):
            path.unlink()
    assert_pcm_frames(run(synthesize(server, "Still here?")))


@pytest.mark.parametrize("name", ["../custom-voices0/alba", "/etc/passwd", "sub/alba", ".."])
def test_a_voice_name_that_is_a_path_is_refused(server, name):
    text, after = run(error_for(server, name))
    assert "plain names, not paths" in text and "alba, bob, carol, dave, voice" in text
    assert after is None


def test_a_link_out_of_the_voices_folder_is_not_a_voice(server, voices_dir, voice_wav, tmp_path):
    outside = tmp_path / "private.wav"
    shutil.copy(voice_wav, outside)
    (voices_dir / "private.wav").symlink_to(outside)
    try:

        async def names():
            async with server.client() as client:
                return [voice.name for voice in (await describe(client)).tts[0].voices]

        assert "private" not in run(names())
        text, after = run(error_for(server, "private"))
        assert "Unknown voice 'private'" in text and after is None
    finally:
        (voices_dir / "private.wav").unlink()
    assert "Ignoring voice private.wav: it links to" in server.log()


# ---------------------------------------------------------------------------
# Predefined voices of a catalog model, downloaded from a (fake) hub on first use

# Runs the server with the catalog's `english` entry pointing at the tiny model's YAML:
# its files still come from the hub paths and revisions the catalog pins.
CATALOG_WRAPPER = """
import sys
from dataclasses import replace
from pathlib import Path
from wyoming_pocket_tts import catalog
config = Path(sys.argv.pop(1))
shipped = catalog.load_catalog()
models = tuple(
    replace(m, config_path=config) if m.name == "english" else m for m in shipped.models
)
catalog.load_catalog = lambda: replace(shipped, models=models)
from wyoming_pocket_tts.__main__ import run
sys.exit(run(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def catalog_hub(tmp_path_factory, tiny_model, voice_wav, other_voice_wav):
    """The tiny model published as `english` (weights, tokenizer.json, voice states)."""
    import safetensors.torch

    from tests.support.fake_hub import FakeHub
    from tests.support.reference_model import reference_export_voice
    from tests.support.tokenizer_json import convert_sentencepiece_to_json
    from wyoming_pocket_tts.catalog import find_model

    directory = tmp_path_factory.mktemp("catalog-hub")
    entry = find_model("english")
    alba = reference_export_voice(tiny_model, voice_wav, directory / "alba.safetensors")
    marius = reference_export_voice(tiny_model, other_voice_wav, directory / "marius.safetensors")
    javert = directory / "javert.safetensors"  # ours, made for another model
    safetensors.torch.save_file(
        safetensors.torch.load_file(str(alba)), str(javert), metadata={"model": "french"}
    )
    tokenizer = convert_sentencepiece_to_json(tiny_model.tokenizer_path, directory / "tok.json")
    with FakeHub() as hub:
        weights = tiny_model.weights_path.read_bytes()
        hub.add(entry.weights, weights)
        hub.add(entry.weights_without_cloning, weights)
        hub.gate(entry.weights.repo_id)
        hub.add(entry.tokenizer, tokenizer.read_bytes())
        for name, path in [("alba", alba), ("marius", marius), ("javert", javert)]:
            hub.add(entry.voice(name).state, path.read_bytes())
        yield hub, entry


def launch_catalog_server(
    directory: Path, tiny_model: BuiltModel, hub, *args: str
) -> ServerProcess:
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(directory / "hf-home"))
    log_path = directory / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CATALOG_WRAPPER,
                str(tiny_model.config_path),
                "--uri",
                f"tcp://127.0.0.1:{port}",
                "--model",
                "english",
                *args,
            ],
            cwd=REPO,
            stderr=log,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
        )
    server = ServerProcess(process, log_path, port)
    server.wait_for_log("Ready")
    return server


def test_catalog_voices_download_on_first_use_then_work_offline(tmp_path, tiny_model, catalog_hub):
    hub, entry = catalog_hub
    cache = tmp_path / "downloads"
    common = ("--voice", "alba", "--download-dir", str(cache), *SHORT)

    def fetched() -> list[str]:
        return sorted(
            r.path.rsplit("/", 1)[-1]
            for r in hub.requests
            if r.method == "GET" and r.revision is not None
        )

    hub.clear_requests()
    first = launch_catalog_server(tmp_path / "online", tiny_model, hub, *common)
    try:
        # At startup: the model without voice cloning (no token), its tokenizer, the
        # default voice. Nothing else.
        assert fetched() == ["alba.safetensors", "model.safetensors", "tokenizer.json"]
        assert_pcm_frames(run(synthesize(first, "The kitchen light is on.")))
        assert_pcm_frames(run(synthesize(first, "The kitchen light is on.", voice="marius")))
        assert fetched() == [
            "alba.safetensors",
            "marius.safetensors",
            "model.safetensors",
            "tokenizer.json",
        ]

        async def voices():
            async with first.client() as client:
                return {voice.name: voice for voice in (await describe(client)).tts[0].voices}

        listed = run(voices())
        assert set(entry.voice_names) <= set(listed)
        assert listed["alba"].attribution.name == "Kyutai"

        text, after = run(error_for(first, "javert"))
        assert "made for the model french" in text and "runs english" in text, text
        assert after is None
    finally:
        assert first.stop() == 0, first.log()
    assert "Traceback" not in first.log()

    hub.clear_requests()
    offline = launch_catalog_server(
        tmp_path / "offline", tiny_model, hub, *common, "--local-files-only"
    )
    try:
        assert_pcm_frames(run(synthesize(offline, "Back again.")))
        assert_pcm_frames(run(synthesize(offline, "Back again.", voice="marius")))
        text, after = run(error_for(offline, "jean"))  # never downloaded
        assert "download --model english --voice jean" in text, text
    finally:
        assert offline.stop() == 0, offline.log()
    assert hub.requests == []
    assert "Traceback" not in offline.log()
