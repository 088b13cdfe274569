"""The voice store: lookup, single-flight loading off the loop, bounded LRU with pinning."""

from __future__ import annotations

import asyncio
import gc
import os
import re
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from wyoming_pocket_tts.voices.store import (
    InvalidVoiceNameError,
    UnknownVoiceError,
    VoiceKind,
    VoiceSource,
    VoiceStore,
    scan_voices_dir,
)


class RecordingLoader:
    """Stands in for the engine: remembers what it loaded and on which thread, and can be
    held back so a test can pile requests onto one load."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.threads: set[int] = set()
        self.release = threading.Event()
        self.release.set()
        self.fail_next = False

    def __call__(self, source: VoiceSource) -> str:
        self.calls.append(source.name)
        self.threads.add(threading.get_ident())
        if not self.release.wait(timeout=30):
            raise TimeoutError("test never released the loader")
        if self.fail_next:
            self.fail_next = False
            raise OSError(f"cannot read {source.path}")
        assert source.path is not None
        return f"state of {source.name} from {source.path.name}"


def sources(*names: str) -> dict[str, VoiceSource]:
    return {
        name: VoiceSource(name, Path(f"/voices/{name}.wav"), VoiceKind.AUDIO, name)
        for name in names
    }


def make_store(loader, names=("alba", "bob", "carol", "dave"), max_loaded=2, default="alba"):
    available = sources(*names)
    return VoiceStore(
        sources=lambda: available,
        load=loader,
        default_voice=default,
        max_loaded=max_loaded,
        executor=ThreadPoolExecutor(max_workers=1),
    )


async def speak(store: VoiceStore, name: str):
    """The voice a request for `name` gets once the store has it."""
    async with store.use(name) as voice:
        return voice


def test_loads_on_first_use_off_the_event_loop_and_reuses():
    loader = RecordingLoader()
    store = make_store(loader)

    async def scenario():
        async with store.use("bob") as voice:
            assert voice == "state of bob from bob.wav"
        async with store.use("bob") as voice:
            assert voice == "state of bob from bob.wav"
        async with store.use(None) as voice:  # no name: the default voice
            assert voice == "state of alba from alba.wav"
        return threading.get_ident()

    loop_thread = asyncio.run(scenario())
    assert loader.calls == ["bob", "alba"]
    assert loop_thread not in loader.threads


def test_unknown_voice_names_itself_and_the_available_ones():
    store = make_store(RecordingLoader())

    async def scenario():
        async with store.use("zed"):
            pass

    with pytest.raises(UnknownVoiceError) as caught:
        asyncio.run(scenario())
    message = str(caught.value)
    assert "'zed'" in message
    assert "alba, bob, carol, dave" in message
    assert caught.value.available == ["alba", "bob", "carol", "dave"]


def test_two_requests_for_one_unloaded_voice_load_it_once():
    loader = RecordingLoader()
    loader.release.clear()
    store = make_store(loader)

    async def scenario():
        first = asyncio.create_task(speak(store, "carol"))
        second = asyncio.create_task(speak(store, "carol"))
        # Both are waiting on the same load while the loop stays free to run this.
        await asyncio.sleep(0.05)
        assert not first.done() and not second.done()
        loader.release.set()
        return await asyncio.gather(first, second)

    assert asyncio.run(scenario()) == ["state of carol from carol.wav"] * 2
    assert loader.calls == ["carol"]


def test_a_waiter_that_goes_away_does_not_cancel_the_load_for_others():
    loader = RecordingLoader()
    loader.release.clear()
    store = make_store(loader)

    async def scenario():
        leaving = asyncio.create_task(speak(store, "dave"))
        staying = asyncio.create_task(speak(store, "dave"))
        await asyncio.sleep(0.05)
        leaving.cancel()
        loader.release.set()
        with pytest.raises(asyncio.CancelledError):
            await leaving
        return await staying

    assert asyncio.run(scenario()) == "state of dave from dave.wav"
    assert loader.calls == ["dave"]


def test_a_failed_load_reaches_every_waiter_and_is_retried_next_time():
    loader = RecordingLoader()
    loader.fail_next = True
    store = make_store(loader)

    async def scenario():
        with pytest.raises(OSError, match=re.escape("cannot read /voices/bob.wav")):
            async with store.use("bob"):
                pass
        assert store.loaded == []
        async with store.use("bob") as voice:
            return voice

    assert asyncio.run(scenario()) == "state of bob from bob.wav"
    assert loader.calls == ["bob", "bob"]


def test_least_recently_used_voice_is_evicted_and_the_default_is_pinned():
    loader = RecordingLoader()
    store = make_store(loader, max_loaded=2)

    async def scenario():
        await store.preload(["alba"])
        for name in ("bob", "carol", "dave"):
            async with store.use(name):
                pass
            assert "alba" in store.loaded  # the oldest, but pinned
            assert len(store.loaded) == 2
        assert store.loaded == ["alba", "dave"]
        async with store.use("bob"):  # evicted earlier: loads again
            pass

    asyncio.run(scenario())
    assert loader.calls == ["alba", "bob", "carol", "dave", "bob"]


def test_recently_used_voice_survives_over_an_older_one():
    loader = RecordingLoader()
    store = make_store(loader, max_loaded=3)

    async def scenario():
        for name in ("alba", "bob", "carol"):
            async with store.use(name):
                pass
        async with store.use("bob"):  # bob is now more recent than carol
            pass
        async with store.use("dave"):
            pass
        return store.loaded

    assert asyncio.run(scenario()) == ["alba", "bob", "dave"]


def test_a_voice_in_use_is_never_evicted():
    loader = RecordingLoader()
    store = make_store(loader, max_loaded=1)

    async def scenario():
        async with store.use("bob"):
            async with store.use("carol"):
                async with store.use("dave"):
                    # Over the bound while all three speak; alba is not even loaded.
                    assert store.loaded == ["bob", "carol", "dave"]
                assert store.loaded == ["bob", "carol"]
            assert store.loaded == ["bob"]
        assert store.loaded == ["bob"]  # within the bound: kept for next time
        await store.preload(["alba"])
        return store.loaded

    assert asyncio.run(scenario()) == ["alba"]


def test_a_replaced_voice_file_is_loaded_again(tmp_path: Path):
    loader = RecordingLoader()
    voice_file = tmp_path / "eve.wav"
    voice_file.write_bytes(b"first")
    store = VoiceStore(
        sources=lambda: scan_voices_dir(tmp_path),
        load=loader,
        default_voice="eve",
        max_loaded=2,
    )

    async def scenario():
        async with store.use("eve"):
            pass
        stat = voice_file.stat()
        os.utime(voice_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        async with store.use("eve"):
            pass
        async with store.use("eve"):
            pass
        return store.loaded

    assert asyncio.run(scenario()) == ["eve"]
    assert loader.calls == ["eve", "eve"]


def test_scan_voices_dir_finds_audio_and_states_and_prefers_states(tmp_path: Path):
    for name in ("anna.wav", "ben.FLAC", "ben.safetensors", "carl.mp3", "notes.txt", ".x.wav"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub.wav").mkdir()

    found = scan_voices_dir(tmp_path)

    assert sorted(found) == ["anna", "ben", "carl"]
    assert found["anna"].kind is VoiceKind.AUDIO
    assert found["ben"].kind is VoiceKind.STATE
    assert found["ben"].path == tmp_path / "ben.safetensors"
    assert "anna.wav" in found["anna"].description
    assert scan_voices_dir(tmp_path / "missing") == {}


def test_a_voice_added_at_run_time_is_available_at_once(tmp_path: Path):
    store = VoiceStore(
        sources=lambda: scan_voices_dir(tmp_path),
        load=RecordingLoader(),
        default_voice="first",
        max_loaded=2,
    )
    with pytest.raises(UnknownVoiceError):
        store.lookup("later")
    (tmp_path / "later.wav").write_bytes(b"")
    assert store.lookup("later").path == tmp_path / "later.wav"


def test_a_path_for_a_voice_name_is_refused_before_anything_is_loaded():
    loader = RecordingLoader()
    store = make_store(loader)

    async def scenario(name):
        async with store.use(name):
            pass

    for name in ("../alba", "/voices/alba", "voices/alba"):
        with pytest.raises(InvalidVoiceNameError, match="plain names, not paths") as caught:
            asyncio.run(scenario(name))
        assert isinstance(caught.value, UnknownVoiceError)  # answered like an unknown voice
        assert caught.value.available == ["alba", "bob", "carol", "dave"]
    assert loader.calls == []


class Voice:
    """A loaded voice that can be watched for being freed."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_evicted_voices_and_abandoned_loads_are_freed() -> None:
    release = threading.Event()
    loaded: dict[str, weakref.ref] = {}

    def load(source: VoiceSource) -> Voice:
        if source.name == "dave":
            release.wait(timeout=30)
        voice = Voice(source.name)
        loaded[source.name] = weakref.ref(voice)
        return voice

    store = make_store(load, max_loaded=2)

    async def scenario():
        await store.preload(["alba"])
        for name in ("bob", "carol"):  # bob goes when carol comes: alba is pinned
            await speak(store, name)
        waiting = asyncio.create_task(speak(store, "dave"))
        await asyncio.sleep(0.05)
        waiting.cancel()  # its only request hangs up while it loads
        release.set()
        while "dave" not in loaded:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the loop learns that the load is done

    asyncio.run(scenario())
    gc.collect()
    assert store.loaded == ["alba", "carol"]
    assert loaded["bob"]() is None
    assert loaded["dave"]() is None
    assert loaded["carol"]() is not None
