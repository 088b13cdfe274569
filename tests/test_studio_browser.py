"""The voice studio's page in a real browser: headless Chromium (Debian's `chromium`,
which .ci/run installs) driven by Playwright, against a real server process.

With STUDIO_SCREENSHOT=PATH set, the page is also saved as a screenshot there (the one
in the documentation is made this way).
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
import soundfile
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info

from tests.support.server import synthesize
from tests.support.studio_server import (
    StudioServer,
    french_model,
    start_bilingual_studio,
    start_studio_server,
)
from tests.support.voices_audio import speech_like_signal

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WAIT_MS = 120_000
PREVIEW_ENDED = "document.getElementById('player').ended"
T = TypeVar("T")

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs Chromium: apt-get install chromium"
)


@pytest.fixture(scope="module")
def studio(tmp_path_factory, tiny_model, voice_wav) -> Iterator[StudioServer]:
    voices = tmp_path_factory.mktemp("browser-voices")
    server = start_studio_server(
        tmp_path_factory.mktemp("browser"), tiny_model.config_path,
        "--voice", str(voice_wav), "--voices-dir", str(voices), "--eos-threshold", "-1000",
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            # Root in a container has no sandbox; previews play without a click; the
            # microphone is Chromium's stand-in, a beeping tone, allowed without asking.
            args=[
                "--no-sandbox", "--autoplay-policy=no-user-gesture-required",
                "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
            ],
        )
        yield browser
        browser.close()


def recording_file(path: Path) -> Path:
    samples = speech_like_signal(5.0, 24000, seed=11, trailing_silence=0.3)
    out = io.BytesIO()
    soundfile.write(out, samples, 24000, format="WAV")
    path.write_bytes(out.getvalue())
    return path


def run_elsewhere(coroutine: Coroutine[Any, Any, T]) -> T:
    """Playwright's synchronous API runs an event loop on this thread: run on another."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


def wyoming_voices(studio: StudioServer) -> list[str]:
    async def describe() -> list[str]:
        async with AsyncTcpClient("127.0.0.1", studio.wyoming_port) as client:
            await client.write_event(Describe().event())
            event = await client.read_event()
        return [voice.name for voice in Info.from_event(event).tts[0].voices]

    return run_elsewhere(describe())


def test_add_hear_and_delete_a_voice_in_the_browser(studio, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1000, "height": 1000})
    page.set_default_timeout(WAIT_MS)
    page.goto(studio.url)
    default = page.locator('li[data-voice="voice"]')
    default.locator(".badge.default").wait_for()
    assert "Model model-english" in page.locator("#model-line").inner_text()
    # One language: one group of voices, and no language to choose for a new one.
    assert page.locator(".language").count() == 1
    assert page.locator("#add-language").is_hidden()

    page.set_input_files("#add-file", recording_file(tmp_path / "Kitchen Test.wav"))
    assert page.input_value("#add-name") == "kitchen_test"  # suggested from the file name
    page.click("#add-button")
    page.locator("#add-message", has_text="Added kitchen_test").wait_for()
    card = page.locator('li[data-voice="kitchen_test"]')
    card.wait_for()
    assert "kitchen_test" in wyoming_voices(studio)

    # Adding plays the new voice's preview: the streamed WAV really plays.
    page.wait_for_function(
        "() => { const p = document.getElementById('player');"
        " return p.src.includes('kitchen_test') && (p.currentTime > 0 || p.ended); }"
    )
    assert page.evaluate("document.getElementById('player').error") is None
    page.wait_for_function(PREVIEW_ENDED)
    duration = page.evaluate("document.getElementById('player').currentTime")
    assert duration >= 6 * 0.08  # at least the minimum of frames of speech
    page.locator("#recent td", has_text="preview").first.wait_for()

    if screenshot := os.environ.get("STUDIO_SCREENSHOT"):
        page.screenshot(path=screenshot, full_page=True)

    page.on("dialog", lambda dialog: dialog.accept())
    card.get_by_role("button", name="Delete").click()
    card.wait_for(state="detached")
    assert "kitchen_test" not in wyoming_voices(studio)


def test_the_page_fits_a_phone(studio, browser):
    page = browser.new_page(viewport={"width": 375, "height": 740}, is_mobile=True)
    page.set_default_timeout(WAIT_MS)
    page.goto(studio.url)
    page.locator('li[data-voice="voice"]').wait_for()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, "the page scrolls sideways on a phone"
    slider = page.locator('li[data-voice="voice"] .speed input').bounding_box()
    assert slider is not None and slider["width"] >= 80, "the speed is hard to set on a phone"
    # Preview from a phone: the button is there and plays.
    page.locator('li[data-voice="voice"]').get_by_role("button", name="Preview").click()
    page.wait_for_function(PREVIEW_ENDED)


def heard_seconds(page, card) -> float:
    """Play the card's preview to its end: how long it played."""
    card.get_by_role("button", name="Preview").click()
    page.wait_for_function(PREVIEW_ENDED)
    assert page.evaluate("document.getElementById('player').error") is None
    return page.evaluate("document.getElementById('player').currentTime")


def wyoming_samples(studio: StudioServer, voice: str) -> int:
    """How long Home Assistant's request with the voice is, in samples."""
    audio = run_elsewhere(synthesize(studio, "Turn the lights on.", voice))
    return sum(len(chunk.audio) for chunk in audio.chunks) // 2


def test_a_speed_set_in_the_page_is_heard_in_previews_and_home_assistant(studio, browser):
    limits = studio.api("GET", "api/status").json()["limits"]
    page = browser.new_page(viewport={"width": 1000, "height": 1000})
    page.set_default_timeout(WAIT_MS)
    page.goto(studio.url)
    card = page.locator('li[data-voice="voice"]')
    speed = card.locator(".speed input")
    speed.wait_for()
    assert [float(speed.get_attribute(key) or "") for key in ("min", "max")] == limits["speed"]
    assert "server's" in card.locator(".speed output").inner_text()
    assert card.get_by_role("button", name="Reset").is_disabled()
    seconds, samples = heard_seconds(page, card), wyoming_samples(studio, "voice")

    speed.fill("1.5")  # as the slider is let go at 1.5
    times = "\N{MULTIPLICATION SIGN}"
    page.locator("#voices-message", has_text=f"voice speaks at 1.5{times}").wait_for()
    assert card.locator(".speed output").inner_text() == f"1.50{times}"
    assert studio.api("GET", "api/voices").json()[0]["speed"] == 1.5
    assert heard_seconds(page, card) == pytest.approx(seconds / 1.5, rel=0.02)
    assert abs(wyoming_samples(studio, "voice") - samples / 1.5) <= 4

    card.get_by_role("button", name="Reset").click()
    page.locator("#voices-message", has_text="the server's speed").wait_for()
    assert studio.api("GET", "api/voices").json()[0]["speed"] is None
    assert wyoming_samples(studio, "voice") == samples
    page.close()


def test_record_a_voice_with_the_microphone(studio, browser):
    page = browser.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(studio.url)
    page.locator('li[data-voice="voice"]').wait_for()
    page.click("#record")
    page.locator("#record-state", has_text="Recording").wait_for()
    page.wait_for_timeout(4000)  # the length of the recording, not a wait for the server
    page.click("#record")
    page.locator("#record-state", has_text="Recorded").wait_for()
    page.fill("#add-name", "microphone")
    page.click("#add-button")
    page.locator("#add-message", has_text="Added microphone").wait_for()
    page.wait_for_function(PREVIEW_ENDED)  # until then the preview speaks with the voice
    assert studio.api("DELETE", "api/voices/microphone").status_code == 204


def test_the_page_takes_its_limits_from_the_server(studio, browser):
    limits = studio.api("GET", "api/status").json()["limits"]
    page = browser.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(studio.url)
    page.locator("#record:enabled").wait_for()  # the status has come
    shortest, longest = limits["recommended_seconds"]
    assert page.inner_text("#speech-advice") == f"{shortest:g} to {longest:g} s"
    sentence = page.locator('.language[data-language="en"] textarea')
    assert sentence.evaluate("e => e.maxLength") == limits["preview_chars"]
    # The browser reads the server's name pattern as the server does.
    for name, valid in (("my-voice_2", True), ("a" * 49, False), ("-a", False)):
        page.fill("#add-name", name)
        assert page.locator("#add-name").evaluate("e => e.validity.valid") is valid, name
    page.close()


RECORDED_SECONDS = """async () => {
    const wav = new DataView(await state.recorded.arrayBuffer());
    return (wav.byteLength - 44) / wav.getUint32(28, true);  // bytes over bytes a second
}"""


def test_the_recorder_stops_where_the_server_stops_listening(studio, browser):
    """With the status's limits made short, and unlike what the page would say by itself:
    the page shows them, and its recorder stops on its own after `decoded_seconds`."""

    def short_limits(route) -> None:
        response = route.fetch()
        status = response.json()
        status["limits"].update(decoded_seconds=2, recommended_seconds=[3, 7])
        route.fulfill(response=response, json=status)

    page = browser.new_page()
    page.set_default_timeout(WAIT_MS)
    page.route("**/api/status", short_limits)
    page.goto(studio.url)
    page.locator("#speech-advice", has_text="3 to 7 s").wait_for()
    page.click("#record")
    page.locator("#record-state", has_text="speak for 3 to 7 s").wait_for()
    page.locator("#record-state", has_text="Recorded").wait_for(timeout=15_000)
    assert 1.0 < page.evaluate(RECORDED_SECONDS) <= 2.0
    page.close()


RECORD_WEBM = """async () => {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const recorder = new MediaRecorder(stream, { mimeType: "audio/webm" });
    const chunks = [];
    recorder.ondataavailable = (event) => chunks.push(event.data);
    const stopped = new Promise((resolve) => { recorder.onstop = resolve; });
    recorder.start();
    await new Promise((resolve) => setTimeout(resolve, 4000));
    recorder.stop();
    await stopped;
    stream.getTracks().forEach((track) => track.stop());
    const bytes = new Uint8Array(await new Blob(chunks).arrayBuffer());
    return Array.from(bytes);
}"""


def test_a_webm_the_server_cannot_decode_is_converted_by_the_page(studio, browser, tmp_path):
    """What a phone's recorder app makes (WebM/Opus here): without ffmpeg the server says
    so, and the page decodes it itself and sends WAV instead."""
    page = browser.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(studio.url)
    page.locator('li[data-voice="voice"]').wait_for()
    webm = bytes(page.evaluate(RECORD_WEBM))
    assert webm[:4] == b"\x1a\x45\xdf\xa3"
    direct = studio.api("POST", "api/voices", files={"file": ("phone.webm", webm)})
    if shutil.which("ffmpeg") is None:
        assert direct.status_code == 415 and "ffmpeg" in direct.json()["error"]
    else:
        assert direct.status_code == 201
        studio.api("DELETE", f"api/voices/{direct.json()['name']}")
    path = tmp_path / "phone.webm"
    path.write_bytes(webm)
    page.set_input_files("#add-file", path)
    page.click("#add-button")
    page.locator("#add-message", has_text="Added phone").wait_for()
    page.wait_for_function(PREVIEW_ENDED)  # until then the preview speaks with the voice
    assert studio.api("DELETE", "api/voices/phone").status_code == 204


def test_the_page_works_under_the_ingress_path(studio, browser):
    """Home Assistant's ingress proxy serves the page under a path of its own, strips it
    and says it in a header: every request the page makes must stay under that path."""
    prefix = "api/hassio_ingress/abc123/"
    outside = []

    def ingress_proxy(route) -> None:
        url = route.request.url
        if not url.startswith(studio.url + prefix):
            outside.append(url)
            route.abort()
            return
        headers = {**route.request.headers, "x-ingress-path": "/" + prefix.rstrip("/")}
        response = route.fetch(url=studio.url + url[len(studio.url + prefix):], headers=headers)
        route.fulfill(response=response)

    page = browser.new_page()
    page.set_default_timeout(WAIT_MS)
    page.route("**/*", ingress_proxy)
    page.goto(studio.url + prefix)
    page.locator('li[data-voice="voice"] .badge.default').wait_for()
    assert "Model model-english" in page.locator("#model-line").inner_text()
    assert outside == []
    page.close()


@pytest.fixture(scope="module")
def bilingual(tmp_path_factory, models_dir, tokenizer_dir, tiny_model, voice_wav, other_voice_wav):
    """English in the voices folder (alba), French in its fr/ subfolder (estelle)."""
    voices = tmp_path_factory.mktemp("bilingual-voices")
    (voices / "fr").mkdir()
    shutil.copy(voice_wav, voices / "alba.wav")
    shutil.copy(other_voice_wav, voices / "fr" / "estelle.wav")
    server = start_bilingual_studio(
        tmp_path_factory.mktemp("bilingual"), tiny_model, french_model(models_dir, tokenizer_dir),
        "--voices-dir", str(voices), "--eos-threshold", "-1000",
    )
    yield server, voices
    server.stop()


def test_two_languages_two_groups_and_a_french_voice_added(bilingual, browser, tmp_path):
    studio, voices = bilingual
    french = studio.api("GET", "api/status").json()["languages"][1]
    page = browser.new_page(viewport={"width": 1000, "height": 1000})
    page.set_default_timeout(WAIT_MS)
    page.goto(studio.url)
    english_group = page.locator('.language[data-language="en"]')
    french_group = page.locator('.language[data-language="fr"]')
    french_group.locator('li[data-voice="estelle"] .badge.default').wait_for()
    english_group.locator('li[data-voice="alba"] .badge.default').wait_for()
    assert page.locator(".language").count() == 2
    assert "French" in french_group.locator("h3").inner_text()
    assert french_group.locator("textarea").input_value() == french["sample_text"]
    # A new voice is for the default language unless another one is chosen.
    assert page.input_value("#add-language") == "en"

    page.select_option("#add-language", "fr")
    page.set_input_files("#add-file", recording_file(tmp_path / "Chanson.wav"))
    page.click("#add-button")
    page.locator("#add-message", has_text="Added chanson").wait_for()
    card = french_group.locator('li[data-voice="chanson"]')
    card.wait_for()
    assert (voices / "fr" / "chanson.wav").is_file()
    assert page.input_value("#add-language") == "fr"  # kept for the next voice
    # Its preview speaks the French group's sentence, with the French model.
    page.wait_for_function(
        "() => { const p = document.getElementById('player');"
        " return p.src.includes('chanson') && (p.currentTime > 0 || p.ended); }"
    )
    page.wait_for_function(PREVIEW_ENDED)
    recent = studio.api("GET", "api/status").json()["recent_requests"][0]
    assert (recent["voice"], recent["chars"]) == ("chanson", len(french["sample_text"]))
    assert "Loaded the fr model" in studio.log()

    page.on("dialog", lambda dialog: dialog.accept())
    card.get_by_role("button", name="Delete").click()
    card.wait_for(state="detached")
    assert not (voices / "fr" / "chanson.wav").exists()
    page.close()
