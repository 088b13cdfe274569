"""The server's command line: environment variables, stdio, and refusing bad startups clearly."""

from __future__ import annotations

import argparse
import gc
import shutil
import threading
from pathlib import Path

import pytest
import torch
from wyoming.client import AsyncUnixClient
from wyoming.event import read_event, write_event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from tests.support.server import FRAME_BYTES, SHORT, assert_pcm_frames, launch, read_audio, run
from wyoming_pocket_tts import resolve
from wyoming_pocket_tts.commands import serve
from wyoming_pocket_tts.commands.options import defaults_from_environment
from wyoming_pocket_tts.engine.cpu.cores import available_cores
from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker
from wyoming_pocket_tts.server import running
from wyoming_pocket_tts.server.config import WarmUp


def parse(argv: list[str], environ: dict[str, str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.configure(parser)
    defaults_from_environment(parser, environ)
    return parser.parse_args(argv)


def test_every_option_can_come_from_the_environment():
    args = parse(
        [],
        {
            "WYOMING_POCKET_TTS_URI": "unix:///run/tts.sock",
            "WYOMING_POCKET_TTS_VOICE": "marius",
            "WYOMING_POCKET_TTS_PRELOAD_VOICE": "alba, jean",
            "WYOMING_POCKET_TTS_VOICES_DIR": "/share/voices",
            "WYOMING_POCKET_TTS_DATA_DIR": "/data/a,/data/b",
            "WYOMING_POCKET_TTS_MAX_LOADED_VOICES": "3",
            "WYOMING_POCKET_TTS_TEMPERATURE": "0.5",
            "WYOMING_POCKET_TTS_NO_STREAMING": "true",
            "WYOMING_POCKET_TTS_LOCAL_FILES_ONLY": "1",
            "WYOMING_POCKET_TTS_ZEROCONF": "kitchen-tts",
            "WYOMING_POCKET_TTS_DEBUG": "off",
            "WYOMING_POCKET_TTS_SENTENCE_SILENCE": "0.25",
            "WYOMING_POCKET_TTS_HTTP_URI": "tcp://0.0.0.0:8099",
            "WYOMING_POCKET_TTS_HTTP_ALLOW": "172.30.32.2, 10.0.0.0/8",
            "WYOMING_POCKET_TTS_THREADS": "1",
        },
    )
    assert args.uri == "unix:///run/tts.sock"
    assert args.voice == "marius"
    assert args.preload_voice == ["alba", "jean"]
    assert args.voices_dir == Path("/share/voices")
    assert args.data_dir == [Path("/data/a"), Path("/data/b")]
    assert args.max_loaded_voices == 3
    assert args.temperature == 0.5
    assert args.no_streaming and args.local_files_only and not args.debug
    assert args.zeroconf == "kitchen-tts"
    assert args.sentence_silence == 0.25
    assert args.http_uri == ("0.0.0.0", 8099)
    assert [str(network) for network in args.http_allow] == ["172.30.32.2/32", "10.0.0.0/8"]
    assert args.threads == 1


def test_the_command_line_wins_over_the_environment():
    environ = {"WYOMING_POCKET_TTS_MAX_LOADED_VOICES": "3", "WYOMING_POCKET_TTS_ZEROCONF": "yes"}
    args = parse(["--max-loaded-voices", "5"], environ)
    assert args.max_loaded_voices == 5
    assert args.zeroconf == ""  # enabled, default name
    assert parse([], {"WYOMING_POCKET_TTS_ZEROCONF": "false"}).zeroconf is None
    assert parse([], {}).uri == "tcp://0.0.0.0:10200"


@pytest.mark.parametrize(
    ("environ", "complaint"),
    [
        ({"WYOMING_POCKET_TTS_DEBUG": "maybe"}, "WYOMING_POCKET_TTS_DEBUG='maybe'"),
        (
            {"WYOMING_POCKET_TTS_MAX_LOADED_VOICES": "many"},
            "--max-loaded-voices: invalid int value",
        ),
    ],
)
def test_a_bad_environment_value_is_a_usage_error(environ, complaint, capsys):
    with pytest.raises(SystemExit) as exited:
        parse([], environ)
    assert exited.value.code == 2
    assert complaint in capsys.readouterr().err


def test_stdio_server_configured_by_environment_answers_and_exits_at_end_of_input(
    tmp_path, tiny_model, voice_wav
):
    server = launch(
        tmp_path,
        tiny_model,
        stdio=True,
        env={
            "WYOMING_POCKET_TTS_VOICE": str(voice_wav),
            "WYOMING_POCKET_TTS_NO_STREAMING": "1",
            "WYOMING_POCKET_TTS_EOS_THRESHOLD": SHORT[1],
            "WYOMING_POCKET_TTS_LANGUAGE": "fr",
        },
    )
    stdin, stdout = server.process.stdin, server.process.stdout
    # Streaming is off: the stream events are ignored, the plain Synthesize answered.
    for event in (
        Describe().event(),
        SynthesizeStart().event(),
        SynthesizeChunk(text="Not spoken. ").event(),
        SynthesizeStop().event(),
        Synthesize(text="The kitchen light is on.").event(),
    ):
        write_event(event, stdin)
    stdin.close()  # end of input: finish what was asked, then exit

    events = []
    while (event := read_event(stdout)) is not None:
        events.append(event)
    assert server.process.wait(timeout=60) == 0, server.log()

    assert Info.is_type(events[0].type)
    program = Info.from_event(events[0]).tts[0]
    assert not program.supports_synthesize_streaming
    assert program.voices[0].languages == ["fr"]  # --language, for a model given as a YAML
    assert [event.type for event in events[1:]] == (
        ["audio-start"] + ["audio-chunk"] * (len(events) - 3) + ["audio-stop"]
    )
    assert len(events) > 3
    assert all(len(event.payload) == FRAME_BYTES for event in events[2:-1])
    assert "Traceback" not in server.log()


def test_an_unknown_default_voice_stops_startup_with_the_available_voices(
    tmp_path, tiny_model, voice_wav
):
    voices = tmp_path / "voices"
    voices.mkdir()
    shutil.copy(voice_wav, voices / "alba.wav")
    server = launch(tmp_path, tiny_model, "--voices-dir", str(voices), "--voice", "zed", wait=False)
    assert server.process.wait(timeout=120) == 1
    log = server.log()
    assert "Unknown voice 'zed'. Available voices: alba" in log
    assert "Traceback" not in log


def test_a_missing_model_file_is_one_clear_line(tmp_path, tiny_model):
    server = launch(tmp_path, tiny_model, "--model", str(tmp_path / "nowhere.yaml"), wait=False)
    assert server.process.wait(timeout=120) == 1
    log = server.log()
    assert "nowhere.yaml" in log and "Traceback" not in log


def test_threads_below_one_stop_startup_with_a_clear_line(tmp_path, tiny_model):
    server = launch(tmp_path, tiny_model, "--threads", "0", wait=False)
    assert server.process.wait(timeout=120) == 2
    assert "--threads must be above 0" in server.log()


def test_zeroconf_needs_tcp(tmp_path, tiny_model):
    server = launch(tmp_path, tiny_model, "--zeroconf", "--uri", "unix:///tmp/x.sock", wait=False)
    assert server.process.wait(timeout=120) == 2
    assert "--zeroconf needs a tcp:// URI" in server.log()


def test_unix_socket_server_speaks(tmp_path, tiny_model, voice_wav):
    path = tmp_path / "tts.sock"
    server = launch(
        tmp_path, tiny_model, "--voice", str(voice_wav), "--uri", f"unix://{path}", *SHORT
    )

    async def scenario():
        async with AsyncUnixClient(str(path), connect_timeout=60, read_timeout=60) as client:
            await client.write_event(Synthesize(text="The kitchen light is on.").event())
            return await read_audio(client)

    try:
        assert_pcm_frames(run(scenario()))
    finally:
        assert server.stop() == 0
    assert not path.exists()  # removed on the way out


def test_zeroconf_that_cannot_announce_warns_and_serves(tmp_path, tiny_model, voice_wav):
    # Bound to loopback there is no address worth announcing: one warning, no failure.
    server = launch(tmp_path, tiny_model, "--voice", str(voice_wav), "--zeroconf", "test", *SHORT)
    try:
        assert "Zeroconf" in server.log()

        async def scenario():
            async with server.client() as client:
                await client.write_event(Synthesize(text="Hello there.").event())
                return await read_audio(client)

        assert_pcm_frames(run(scenario()))
    finally:
        assert server.stop() == 0
    assert "Traceback" not in server.log()


def start_up(tmp_path, tiny_model, voice_wav, serving, monkeypatch) -> int:
    """`serve.main` in this process, with `serving` run where it would serve clients.

    The test process's objects, which the start-up freezes out of garbage collection
    as a server's, are given back to the collector after it. The process set-up is
    skipped: it would change this process's environment for later tests' servers.
    """
    monkeypatch.setattr(running, "listen", serving)
    monkeypatch.setattr(serve, "prepare_process", lambda quantized, threads: None)
    args = parse(
        ["--model", str(tiny_model.config_path), "--voice", str(voice_wav),
         "--download-dir", str(tmp_path), "--local-files-only"],
        {},
    )
    try:
        return serve.main(args)
    finally:
        gc.unfreeze()


def test_the_model_and_encodings_run_on_threads_that_end_and_reads_on_one_core(
    tmp_path, tiny_model, voice_wav, monkeypatch
) -> None:
    """Loading the model and encoding a recording use every core on a thread of their
    own, so that no long-lived thread keeps OpenMP workers that would slow the
    synthesis worker (engine/cpu/threads.py); reading voices, which lasts, keeps
    torch on one core."""
    ran_on: list[tuple[str, threading.Thread, int]] = []
    load_model, encode = PocketTTS.load, PocketTTS.voice_from_audio
    voice_loader = resolve.voice_loader

    def record(what: str) -> None:
        ran_on.append((what, threading.current_thread(), torch.get_num_threads()))

    def recording_load(*args, **kwargs):
        record("model")
        return load_model(*args, **kwargs)

    def recording_encode(*args, **kwargs):
        record("encoding")
        return encode(*args, **kwargs)

    def recording_voice_loader(*args):
        load_voice = voice_loader(*args)

        def load(source):
            record("voice")
            return load_voice(source)

        return load

    ended = []

    async def serve_nothing(*args) -> None:  # while serving: the threads that end are gone
        for what, thread, _ in ran_on:
            if what != "voice":
                thread.join(timeout=30)
                ended.append(not thread.is_alive())

    recording = tmp_path / "fresh.wav"  # never encoded before: no cache of it
    shutil.copy(voice_wav, recording)
    monkeypatch.setattr(PocketTTS, "load", recording_load)
    monkeypatch.setattr(PocketTTS, "voice_from_audio", recording_encode)
    monkeypatch.setattr(resolve, "voice_loader", recording_voice_loader)
    assert start_up(tmp_path, tiny_model, recording, serve_nothing, monkeypatch) == 0
    assert [what for what, _, _ in ran_on] == ["model", "voice", "encoding"]
    assert all(thread is not threading.main_thread() for _, thread, _ in ran_on)
    assert ended == [True, True]
    threads = {what: count for what, _, count in ran_on}
    assert threads["voice"] == 1
    assert threads["model"] == threads["encoding"] == available_cores()


def test_the_server_speaks_once_unheard_before_serving(
    tmp_path, tiny_model, voice_wav, monkeypatch
):
    """A warm-up, so that the first request's audio starts as soon as the next ones'."""
    submitted = []
    submit = SynthesisWorker.submit

    def recording_submit(self, voice, text, *args, **kwargs):
        job = submit(self, voice, text, *args, **kwargs)
        submitted.append((text, job))
        return job

    before_serving = []

    async def serve_nothing(*args) -> None:
        before_serving.extend(submitted)

    monkeypatch.setattr(SynthesisWorker, "submit", recording_submit)
    assert start_up(tmp_path, tiny_model, voice_wav, serve_nothing, monkeypatch) == 0
    assert [text for text, _ in before_serving] == [WarmUp().text]
    job = before_serving[0][1]
    assert job.samples > 0 and job.error is None


def test_start_up_objects_are_left_out_of_later_garbage_collections():
    alive = [object()]  # a container the collector tracks, made "at start-up"
    assert any(tracked is alive for tracked in gc.get_objects())
    try:
        frozen = running.freeze_start_up_objects()
        # Frozen objects are still freed by refcounting, on any thread (a thread that an
        # earlier test started may drop some meanwhile), so the count can only shrink.
        assert 0 < gc.get_freeze_count() <= frozen
        assert not any(tracked is alive for tracked in gc.get_objects())
    finally:
        gc.unfreeze()
