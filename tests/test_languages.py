"""Which language speaks a request, and which languages' models stay in memory.

The loader here builds a record instead of a model: what is tested is the bookkeeping
(choosing, loading once, unloading the least recently used), which does not depend on
what is loaded; tests/test_multilingual_server.py speaks with real models.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.answers import ANSWERS
from tests.support.reference_model import BuiltModel
from wyoming_pocket_tts import resolve
from wyoming_pocket_tts.languages import Language, Languages
from wyoming_pocket_tts.voices.names import LanguageVoice
from wyoming_pocket_tts.voices.store import (
    InvalidVoiceNameError,
    UnknownVoiceError,
    VoiceKind,
    VoiceSource,
)

ALL = ("en", "fr", "de", "it", "pt", "es", "nl")
SENTENCES = ANSWERS


@dataclass(frozen=True)
class Loaded:
    code: str


class Loader:
    """Counts loads; a language in `held` waits until released."""

    def __init__(self, held: tuple[str, ...] = (), failing: tuple[str, ...] = ()) -> None:
        self.loads: list[str] = []
        self.gates = {code: threading.Event() for code in held}
        self.failing = set(failing)

    def __call__(self, language: Language) -> Loaded:
        if language.code in self.gates:
            assert self.gates[language.code].wait(10)
        self.loads.append(language.code)
        if language.code in self.failing:
            self.failing.discard(language.code)
            raise OSError(f"cannot read the {language.code} model")
        return Loaded(language.code)


def _language(code: str, config: Path) -> Language:
    resolved = resolve.resolve_model(
        resolve.ModelOptions(model=str(config), languages=(code,))
    )
    own = {
        name: VoiceSource(name, Path(f"{name}.wav"), VoiceKind.AUDIO, "")
        for name in (f"voice_{code}", "shared")
    }
    return Language(code, resolved, lambda: own, default_voice=f"voice_{code}")


def _languages(
    tiny_model: BuiltModel, codes: tuple[str, ...] = ALL, max_loaded: int = 8,
    loader: Loader | None = None,
) -> Languages[Loaded]:
    return Languages(
        [_language(code, tiny_model.config_path) for code in codes],
        load=loader or Loader(), max_loaded=max_loaded, native=lambda code, source: True,
    )


# -- choosing -------------------------------------------------------------------------


@pytest.mark.parametrize("code", ALL)
def test_a_named_voice_speaks_its_own_language(tiny_model: BuiltModel, code: str) -> None:
    languages = _languages(tiny_model)
    other = "nl" if code != "nl" else "en"
    assert languages.choose(f"voice_{code}", other, SENTENCES[other]) == LanguageVoice(
        code, f"voice_{code}"
    )


def test_a_name_in_several_languages_is_served_once_each(tiny_model: BuiltModel) -> None:
    languages = _languages(tiny_model, ("de", "es"))
    assert languages.choose("shared", None, "") == LanguageVoice("de", "shared")
    assert languages.choose("shared-es", None, "") == LanguageVoice("es", "shared")


@pytest.mark.parametrize("code", ALL)
@pytest.mark.parametrize("tag", ["{}", "{}-XX", "{}_xx"])
def test_the_clients_language_picks_the_model(tiny_model: BuiltModel, code: str, tag: str) -> None:
    """Wyoming's `voice.language`, however the region is written, over the text's."""
    languages = _languages(tiny_model)
    assert languages.choose(None, tag.format(code.upper()), SENTENCES["en"]) == (
        LanguageVoice(code, f"voice_{code}")
    )


@pytest.mark.parametrize("code", ALL)
def test_otherwise_the_texts_language_speaks(tiny_model: BuiltModel, code: str) -> None:
    languages = _languages(tiny_model)
    assert languages.choose(None, "ja", SENTENCES[code]) == LanguageVoice(code, f"voice_{code}")
    assert languages.choose(None, None, SENTENCES[code]) == LanguageVoice(code, f"voice_{code}")


@pytest.mark.parametrize("default", ["it", "pt"])
def test_a_short_answer_is_the_default_languages(tiny_model: BuiltModel, default: str) -> None:
    languages = _languages(tiny_model, (default, *(c for c in ALL if c != default)))
    assert languages.choose(None, None, "Done.") == LanguageVoice(default, f"voice_{default}")


def test_unknown_voices_are_refused_with_the_list(tiny_model: BuiltModel) -> None:
    languages = _languages(tiny_model, ("en", "fr"))
    with pytest.raises(UnknownVoiceError, match="voice_fr") as refused:
        languages.choose("voice_de", None, "")
    assert "shared-fr" in refused.value.available
    with pytest.raises(InvalidVoiceNameError):
        languages.choose("../voice_fr", None, "")


# -- loading and unloading ----------------------------------------------------------


def run(test: Callable[..., Coroutine[None, None, None]]) -> Callable[..., None]:
    """Run an async test in an event loop of its own."""

    @functools.wraps(test)
    def sync(*args: object, **kwargs: object) -> None:
        asyncio.run(test(*args, **kwargs))

    return sync


async def _use(languages: Languages[Loaded], code: str) -> Loaded:
    async with languages.use(code) as loaded:
        return loaded


@run
async def test_models_load_on_first_use_once(tiny_model: BuiltModel) -> None:
    loader = Loader()
    languages = _languages(tiny_model, ("en", "fr", "nl"), loader=loader)
    assert languages.loaded == []
    results = await asyncio.gather(*(_use(languages, "fr") for _ in range(5)))
    assert results == [Loaded("fr")] * 5
    assert loader.loads == ["fr"]
    await languages.preload("en")
    assert loader.loads == ["fr", "en"]
    assert languages.loaded == ["fr", "en"]


@run
async def test_beyond_the_bound_the_least_recently_used_goes(tiny_model: BuiltModel) -> None:
    loader = Loader()
    languages = _languages(tiny_model, ("en", "fr", "de"), max_loaded=2, loader=loader)
    for code in ("en", "fr", "de"):
        await _use(languages, code)
    assert sorted(languages.loaded) == ["de", "en"]  # not the default, English
    for code in ("de", "en", "fr"):  # English was used last: German goes all the same
        await _use(languages, code)
    assert loader.loads == ["en", "fr", "de", "fr"]
    assert sorted(languages.loaded) == ["en", "fr"]


@run
async def test_the_default_language_and_one_in_use_stay(tiny_model: BuiltModel) -> None:
    languages = _languages(tiny_model, ("nl", "es", "pt"), max_loaded=1)
    await _use(languages, "nl")
    async with languages.use("es"):
        async with languages.use("pt"):
            assert sorted(languages.loaded) == ["es", "nl", "pt"]
        assert sorted(languages.loaded) == ["es", "nl"]
    assert languages.loaded == ["nl"]


@run
async def test_loading_holds_back_no_other_language(tiny_model: BuiltModel) -> None:
    loader = Loader(held=("de",))
    languages = _languages(tiny_model, ("en", "de"), loader=loader)
    german = asyncio.create_task(_use(languages, "de"))
    assert await asyncio.wait_for(_use(languages, "en"), 5) == Loaded("en")
    assert not german.done()
    loader.gates["de"].set()
    assert await asyncio.wait_for(german, 5) == Loaded("de")


@run
async def test_a_load_whose_requests_left_is_kept(tiny_model: BuiltModel) -> None:
    loader = Loader(held=("it",))
    languages = _languages(tiny_model, ("en", "it"), loader=loader)
    waiting = asyncio.create_task(_use(languages, "it"))
    await asyncio.sleep(0.05)
    waiting.cancel()
    loader.gates["it"].set()
    for _ in range(100):
        if "it" in languages.loaded:
            break
        await asyncio.sleep(0.02)
    assert languages.loaded == ["it"]
    assert await _use(languages, "it") == Loaded("it")
    assert loader.loads == ["it"]


@run
async def test_a_failed_load_is_tried_again(tiny_model: BuiltModel) -> None:
    loader = Loader(failing=("es",))
    languages = _languages(tiny_model, ("en", "es"), loader=loader)
    with pytest.raises(OSError, match="cannot read the es model"):
        await _use(languages, "es")
    assert await _use(languages, "es") == Loaded("es")
    assert loader.loads == ["es", "es"]
