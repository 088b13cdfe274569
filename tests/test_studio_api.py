"""The voice studio's HTTP API, over HTTP, against a real server process (tiny model)."""

from __future__ import annotations

import ast
import asyncio
import http.client
import io
import json
import re
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile
from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.tts import SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from tests.support.studio_server import StudioServer, start_studio_server
from tests.support.voices_audio import speech_like_signal
from wyoming_pocket_tts import studio as studio_package

SHORT = ["--eos-threshold", "-1000"]  # every chunk ends after the minimum of frames
RATE = 24000
REPO = Path(__file__).resolve().parent.parent


def recording(
    seconds: float = 4.0, rate: int = RATE, format: str = "WAV", gain: float = 1.0, seed: int = 3,
    **write: str,
) -> bytes:
    samples = speech_like_signal(seconds, rate, seed, trailing_silence=0.3) * gain
    out = io.BytesIO()
    soundfile.write(out, np.clip(samples, -1, 1), rate, format=format, **write)
    return out.getvalue()


@pytest.fixture(scope="module")
def voices_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("studio-voices")


@pytest.fixture(scope="module")
def studio(tmp_path_factory, tiny_model, voice_wav, voices_dir) -> Iterator[StudioServer]:
    server = start_studio_server(
        tmp_path_factory.mktemp("studio"), tiny_model.config_path,
        "--voice", str(voice_wav), "--voices-dir", str(voices_dir), *SHORT,
    )
    yield server
    server.stop()


def add(studio: StudioServer, data: bytes, name: str | None, filename: str = "voice.wav"):
    form = {"name": name} if name is not None else {}
    return studio.api("POST", "api/voices", files={"file": (filename, data)}, data=form)


def names(studio: StudioServer) -> list[str]:
    return [voice["name"] for voice in studio.api("GET", "api/voices").json()]


async def wyoming_voices(studio: StudioServer) -> list[str]:
    async with AsyncTcpClient("127.0.0.1", studio.wyoming_port) as client:
        await client.write_event(Describe().event())
        event = await client.read_event()
    assert event is not None and Info.is_type(event.type)
    return [voice.name for voice in Info.from_event(event).tts[0].voices]


def test_status_tells_the_model_version_and_folder(studio, voices_dir, tiny_model):
    status = studio.api("GET", "api/status").json()
    assert status["model"]["name"] == tiny_model.config_path.stem
    assert status["model"]["languages"] == ["en"]
    assert status["voice_cloning"] == {"available": True, "reason": None}
    assert status["voices_folder"] == str(voices_dir.resolve())
    assert status["default_voice"] == "voice"
    assert "voice" in status["loaded_voices"]
    # One language, one group of voices: the page shows it as before.
    (language,) = status["languages"]
    assert language == {
        "code": "en", "name": "English", "model": tiny_model.config_path.stem, "default": True,
        "loaded": True, "default_voice": "voice", "voices_folder": str(voices_dir.resolve()),
        "sample_text": language["sample_text"],
    }
    assert {voice["language"] for voice in studio.api("GET", "api/voices").json()} == {"en"}


def quiet(seconds: float, rate: int = 8000) -> np.ndarray:
    return np.zeros(round(seconds * rate), dtype=np.int16)


def wav(samples: np.ndarray, rate: int = 8000) -> bytes:
    out = io.BytesIO()
    soundfile.write(out, samples, rate, format="WAV")
    return out.getvalue()


def test_status_reports_the_limits_the_server_enforces(studio):
    limits = studio.api("GET", "api/status").json()["limits"]

    at_size = add(studio, b"RIFF" + bytes(limits["upload_bytes"] - 4), "big")
    assert at_size.status_code == 415, at_size.text  # not refused for its size
    over_size = add(studio, b"RIFF" + bytes(limits["upload_bytes"] - 3), "big")
    assert over_size.status_code == 413, over_size.text

    too_long = add(studio, wav(quiet(limits["recording_seconds"] + 1)), "long")
    assert too_long.status_code == 413 and "minutes" in too_long.json()["error"]
    # Speech after the part that is decoded is not heard.
    speech = speech_like_signal(5.0, 8000, seed=3, trailing_silence=0.3)
    late = np.concatenate([quiet(limits["decoded_seconds"] + 1) / 32768, speech])
    assert "silent" in add(studio, wav(late), "late").json()["error"]
    short = add(studio, recording(seconds=limits["min_speech_seconds"] - 0.5), "short")
    assert short.status_code == 422 and "of speech" in short.json()["error"]
    assert limits["recommended_seconds"][1] == limits["prompt_seconds"]
    assert limits["min_speech_seconds"] < limits["recommended_seconds"][0]

    text = "a" * (limits["preview_chars"] + 1)
    assert studio.api("GET", "api/voices/voice/preview", params={"text": text}).status_code == 400
    for name in ("a" * 49, "-a", "a.b"):
        assert not re.fullmatch(limits["name_pattern"], name)
        assert add(studio, recording(), name).status_code == 400


def statuses_in_code() -> set[int]:
    """Every HTTP status the studio's code names: in a StudioError or an error response,
    as `status=` or a `status` parameter's default, or as an aiohttp exception."""
    from aiohttp import web

    found: set[int] = set()
    for path in Path(studio_package.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            values: list[ast.expr] = []
            if isinstance(node, ast.Call):
                callee = node.func.id if isinstance(node.func, ast.Name) else getattr(
                    node.func, "attr", ""
                )
                if callee in ("StudioError", "_error"):
                    values += node.args
                values += [keyword.value for keyword in node.keywords if keyword.arg == "status"]
            elif isinstance(node, ast.arguments):
                named = [*node.posonlyargs, *node.args]
                defaults = zip(named[len(named) - len(node.defaults):], node.defaults, strict=True)
                values += [default for argument, default in defaults if argument.arg == "status"]
            elif isinstance(node, ast.Attribute) and node.attr.startswith("HTTP"):
                found.add(getattr(getattr(web, node.attr, None), "status_code", -1))
            found |= {
                value.value for value in values
                if isinstance(value, ast.Constant) and isinstance(value.value, int)
            }
    return {status for status in found if 100 <= status < 600}


def test_the_doc_lists_every_status_the_studio_answers_with():
    found = statuses_in_code()
    assert {201, 204, 413, 422, 507} <= found  # the search finds what is there
    doc = (REPO / "docs" / "studio-api.md").read_text()
    assert sorted(status for status in found if f"`{status}`" not in doc) == []


def test_the_page_is_served_with_relative_urls(studio):
    page = studio.api("GET", "")
    assert page.status_code == 200 and "text/html" in page.headers["Content-Type"]
    assert 'src="static/studio.js"' in page.text and 'href="/' not in page.text
    script = studio.api("GET", "static/studio.js").text
    assert '"api/voices"' in script and "fetch(\"/" not in script


def test_a_recording_becomes_a_voice_everywhere_until_deleted(studio, voices_dir):
    created = add(studio, recording(), "anna")
    assert created.status_code == 201, created.text
    voice = created.json()
    assert voice["name"] == "anna" and voice["kind"] == "custom" and voice["editable"]
    assert "anna" in names(studio)
    assert "anna" in asyncio.run(wyoming_voices(studio))
    # Encoded once, at upload: the state is cached beside the recording.
    assert (voices_dir / "anna.wav").is_file()
    assert list((voices_dir / ".pocket-tts-cache").glob("anna.*.safetensors"))

    assert studio.api("DELETE", "api/voices/anna").status_code == 204
    assert "anna" not in names(studio)
    assert "anna" not in asyncio.run(wyoming_voices(studio))
    assert not list(voices_dir.rglob("anna*")), "the recording or its cache is left behind"


@pytest.mark.parametrize(
    "format, write",
    [("FLAC", {}), ("OGG", {"subtype": "VORBIS"}), ("MP3", {}), ("WAV", {"subtype": "FLOAT"})],
)
def test_common_formats_are_accepted(studio, format, write):
    data = recording(format=format, rate=44100, **write)
    response = add(studio, data, None, filename=f"Take One.{format.lower()}")
    assert response.status_code == 201, response.text
    name = response.json()["name"]
    assert name.startswith("take_one")  # suggested from the file name
    assert studio.api("DELETE", f"api/voices/{name}").status_code == 204


def test_long_recording_is_trimmed_to_what_the_model_uses(studio, voices_dir):
    quiet_start = np.zeros(3 * RATE)
    speech = speech_like_signal(45.0, RATE, 4, trailing_silence=0.0)
    out = io.BytesIO()
    soundfile.write(out, np.concatenate([quiet_start, speech]), RATE, format="WAV")
    assert add(studio, out.getvalue(), "long").status_code == 201
    kept = soundfile.info(str(voices_dir / "long.wav"))
    assert 29.0 <= kept.duration <= 30.0
    assert studio.api("DELETE", "api/voices/long").status_code == 204


def test_preview_streams_a_wav_of_the_text(studio):
    response = studio.api("GET", "api/voices/voice/preview", params={"text": "Hello there."},
                          stream=True)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "audio/wav"
    assert response.headers.get("Transfer-Encoding") == "chunked"
    body = response.raw.read()
    channels, rate = struct.unpack("<HI", body[22:28])
    assert (body[:4], body[8:12], channels, rate, body[34]) == (b"RIFF", b"WAVE", 1, RATE, 16)
    audio = np.frombuffer(body[44:], dtype="<i2")
    assert len(audio) >= 6 * 1920 and np.abs(audio).max() > 0
    recent = studio.api("GET", "api/status").json()["recent_requests"][0]
    assert recent["kind"] == "preview" and recent["voice"] == "voice" and recent["chars"] == 12
    assert recent["first_audio_seconds"] > 0 and recent["speed"] > 0


def test_wyoming_requests_show_in_recent_requests(studio):
    async def speak() -> None:
        async with AsyncTcpClient("127.0.0.1", studio.wyoming_port) as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk("Turn the lights on.").event())
            await client.write_event(SynthesizeStop().event())
            while (event := await client.read_event()) is not None:
                if event.type == "synthesize-stopped":
                    return

    asyncio.run(speak())
    recent = studio.api("GET", "api/status").json()["recent_requests"][0]
    assert (recent["kind"], recent["voice"], recent["chars"]) == ("stream", "voice", 19)


def test_export_import_and_rename(studio, voices_dir):
    assert add(studio, recording(seed=5), "bea").status_code == 201
    exported = studio.api("GET", "api/voices/bea/export")
    assert exported.status_code == 200
    assert exported.headers["Content-Disposition"].endswith("''bea.safetensors")
    imported = add(studio, exported.content, "bea_copy", filename="whatever.bin")
    assert imported.status_code == 201, imported.text
    assert imported.json()["source"] == "state"
    # The imported state speaks like the voice it came from.
    assert studio.api("GET", "api/voices/bea_copy/export").content == (
        voices_dir / "bea_copy.safetensors"
    ).read_bytes()

    renamed = studio.api("PATCH", "api/voices/bea", json={"name": "beatrice"})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["name"] == "beatrice"
    assert "bea" not in names(studio) and "beatrice" in names(studio)
    assert not list(voices_dir.rglob("bea.*")), "the old name's files or cache are left"
    assert studio.api("GET", "api/voices/beatrice/preview", params={"text": "Hi."}).ok
    for name in ("beatrice", "bea_copy"):
        assert studio.api("DELETE", f"api/voices/{name}").status_code == 204


def silent() -> bytes:
    out = io.BytesIO()
    soundfile.write(out, np.zeros(5 * RATE), RATE, format="WAV")
    return out.getvalue()


def ten_minutes_and_more() -> bytes:
    out = io.BytesIO()
    soundfile.write(out, np.zeros(601 * 8000, dtype=np.int16), 8000, format="WAV")
    return out.getvalue()


def m4a_header() -> bytes:
    return b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00M4A mp42isom" + bytes(200)


@pytest.mark.parametrize(
    "data, name, status, message",
    [
        (b"just some text, not audio", "x", 415, "neither a recording"),
        (b"RIFF\x00\x00\x00\x00WAVEjunkjunk", "x", 415, "cannot be decoded"),
        (b"", "x", 400, "empty"),
        (silent(), "x", 422, "silent"),
        (recording(seconds=1.0), "x", 422, "of speech"),
        (recording(gain=3.0), "x", 422, "clipped"),
        (ten_minutes_and_more(), "x", 413, "minutes"),
        (struct.pack("<Q", 60) + b"{" + bytes(100), "x", 422, "voice file cannot be used"),
        (struct.pack("<Q", 20) + b'{"__metadata__":{}}' + bytes(4), "x", 422, "cannot be used"),
        (recording(), "../escape", 400, "Invalid voice name"),
        (recording(), ".hidden", 400, "Invalid voice name"),
        (recording(), "a/b", 400, "Invalid voice name"),
        (recording(), "x" * 49, 400, "Invalid voice name"),
        (recording(), "voice", 409, "exists already"),
    ],
    ids=[
        "not-audio", "broken-wav", "empty", "silent", "too-short", "clipped", "too-long",
        "broken-state", "empty-state", "dotdot", "hidden", "slash", "long-name", "taken",
    ],
)
def test_bad_uploads_get_a_clear_message(studio, voices_dir, data, name, status, message):
    before = sorted(path.name for path in voices_dir.iterdir())
    response = add(studio, data, name)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]
    assert sorted(path.name for path in voices_dir.iterdir()) == before


def test_compressed_recording_without_ffmpeg_says_so(studio):
    response = add(studio, m4a_header(), "phone", filename="phone.m4a")
    if studio.api("GET", "api/status").json()["compressed_uploads"]:
        assert response.status_code == 415 and "cannot be decoded" in response.json()["error"]
    else:
        assert response.status_code == 415 and "ffmpeg" in response.json()["error"]


def test_a_voice_file_of_another_model_shape_is_refused(studio):
    from safetensors.numpy import save

    wrong = {
        "transformer.layers.0.self_attn/cache": np.zeros((2, 1, 4, 3, 5), dtype=np.float32),
        "transformer.layers.0.self_attn/offset": np.array([4]),
    }
    response = add(studio, save(wrong), "wrong")
    assert response.status_code == 422 and "another model" in response.json()["error"]


def test_oversized_upload_is_refused(studio):
    response = add(studio, b"RIFF" + bytes(21 * 1024 * 1024), "huge")
    assert response.status_code == 413 and "MB" in response.json()["error"]


@pytest.mark.parametrize(
    "method, path, body, status",
    [
        ("POST", "api/voices", {"data": "plain"}, 415),
        ("POST", "api/voices", {"files": {"other": ("a", b"1")}}, 400),
        ("PATCH", "api/voices/voice", {"json": {"name": "other"}}, 403),
        ("PATCH", "api/voices/nobody", {"json": {"name": "other"}}, 404),
        ("PATCH", "api/voices/voice", {"data": "not json"}, 400),
        ("DELETE", "api/voices/voice", {}, 403),
        ("DELETE", "api/voices/nobody", {}, 404),
        ("DELETE", "api/voices/..%2F..%2Fetc", {}, 404),
        ("GET", "api/voices/nobody/preview", {}, 404),
        ("GET", "api/voices/nobody/export", {}, 404),
        ("GET", "api/voices/voice/preview?text=", {}, 400),
        ("GET", "api/voices/voice/preview?text=" + "a" * 501, {}, 400),
        ("GET", "api/nothing", {}, 404),
        ("PUT", "api/voices", {}, 405),
    ],
)
def test_bad_requests(studio, method, path, body, status):
    response = studio.api(method, path, **body)
    assert response.status_code == status, response.text
    assert response.json()["error"]


def test_rename_checks_the_new_name(studio):
    assert add(studio, recording(seed=6), "carl").status_code == 201
    for new_name, status in (("../carl", 400), ("voice", 409), ("", 400)):
        response = studio.api("PATCH", "api/voices/carl", json={"name": new_name})
        assert response.status_code == status, response.text
    assert studio.api("DELETE", "api/voices/carl").status_code == 204


def test_a_voice_in_use_is_not_deleted_under_its_request(studio):
    assert add(studio, recording(seed=7), "dora").status_code == 201

    async def hold_and_delete() -> tuple[int, int]:
        async with AsyncTcpClient("127.0.0.1", studio.wyoming_port) as client:
            # A stream holds its voice until it stops: here, once its first audio came.
            await client.write_event(SynthesizeStart(voice=SynthesizeVoice("dora")).event())
            # The next sentence's start completes the first, which is then spoken.
            await client.write_event(SynthesizeChunk("The first sentence is spoken. And").event())
            while not AudioChunk.is_type((await client.read_event()).type):
                pass
            during = await asyncio.to_thread(studio.api, "DELETE", "api/voices/dora")
            await client.write_event(SynthesizeStop().event())
            while (await client.read_event()).type != "synthesize-stopped":
                pass
        after = await asyncio.to_thread(studio.api, "DELETE", "api/voices/dora")
        return during.status_code, after.status_code

    assert asyncio.run(hold_and_delete()) == (409, 204)


def test_another_site_cannot_change_voices(studio):
    evil = {"Origin": "http://evil.example"}
    response = studio.api("DELETE", "api/voices/nobody", headers=evil)
    assert response.status_code == 403
    # Home Assistant's ingress proxy comes from its own origin, with its header.
    ingress = {
        "Origin": "http://homeassistant.local:8123", "X-Ingress-Path": "/api/hassio_ingress/x"
    }
    assert studio.api("DELETE", "api/voices/nobody", headers=ingress).status_code == 404


def request_from(source: str, port: int, path: str) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60,
                                            source_address=(source, 0))
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_only_allowed_addresses_and_no_folder(tmp_path, tiny_model, voice_wav):
    """As in the add-on, only the ingress proxy's address may connect; without a voices
    folder, voices can be heard but not added."""
    server = start_studio_server(
        tmp_path, tiny_model.config_path, "--voice", str(voice_wav), "--http-allow", "127.0.0.2",
        *SHORT,
    )
    try:
        status, refused = request_from("127.0.0.1", server.http_port, "/api/status")
        assert status == 403 and "address" in refused["error"]
        assert request_from("127.0.0.2", server.http_port, "/api/status")[0] == 200
        connection = http.client.HTTPConnection(
            "127.0.0.1", server.http_port, timeout=60, source_address=("127.0.0.2", 0)
        )
        connection.request("GET", "/api/status")
        status = json.loads(connection.getresponse().read())
        assert status["voices_folder"] is None
        boundary = "b0undary"
        form = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
            f"Content-Type: audio/wav\r\n\r\n"
        ).encode() + recording() + f"\r\n--{boundary}--\r\n".encode()
        connection.request(
            "POST", "/api/voices", body=form,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        response = connection.getresponse()
        assert response.status == 409
        assert "--voices-dir" in json.loads(response.read())["error"]
        # Nor can a voice keep a speed of its own: it would be kept in that folder.
        connection.request(
            "PATCH", "/api/voices/voice", body=json.dumps({"speed": 1.5}),
            headers={"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        assert response.status == 409
        assert "--voices-dir" in json.loads(response.read())["error"]
        connection.close()
    finally:
        server.stop()
