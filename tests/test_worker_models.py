"""One worker speaking several models (languages) side by side."""

from __future__ import annotations

import functools
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.support.contention import SetContention
from tests.support.reference_model import BuiltModel, build_model
from tests.support.waiting import wait_until
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

QuietWorker = functools.partial(SynthesisWorker, contention=SetContention(busy=False))
OPTIONS = GenerationOptions(temperature=0.0, max_frames_per_chunk=12)
TEXTS = {
    "en": "Turn on the kitchen light.",
    "fr": "Allume la lumière de la cuisine, s'il te plaît.",
}
both_ways = pytest.mark.parametrize("take_turns", [False, True], ids=["side-by-side", "turns"])


@pytest.fixture(scope="module")
def french_model(models_dir: Path, tokenizer_dir: Path) -> BuiltModel:
    return build_model(models_dir / "tiny_fr", base="french", tiny=True, seed=1,
                       tokenizer_dir=tokenizer_dir)


@pytest.fixture(scope="module")
def speakers(model, voice, french_model: BuiltModel, voice_wav: Path):
    """(synthesizer, voice) for English and French, each voice made by its own model."""
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS

    french = PocketTTS.load(french_model.config_path)
    return {
        "en": (Synthesizer(model), voice),
        "fr": (Synthesizer(french), french.voice_from_audio(voice_wav)),
    }


def _alone(speakers, language: str) -> np.ndarray:
    synthesizer, voice = speakers[language]
    return np.concatenate(list(synthesizer.stream(voice, TEXTS[language], OPTIONS)))


@both_ways
def test_each_job_is_spoken_by_its_own_model(speakers, take_turns: bool) -> None:
    """Jobs of two models at once each sound as their own model alone makes them: a
    step or a Mimi call over both models' frames would change them."""
    alone = {language: _alone(speakers, language) for language in TEXTS}
    assert alone["en"].shape != alone["fr"].shape or not np.allclose(alone["en"], alone["fr"])
    english, _ = speakers["en"]
    with QuietWorker(english, take_turns=take_turns) as worker:
        jobs = {
            language: worker.submit(voice, TEXTS[language], OPTIONS, synthesizer=synthesizer)
            for language, (synthesizer, voice) in speakers.items()
        }
        together = {language: np.concatenate(list(job.frames())) for language, job in jobs.items()}
    for language in TEXTS:
        assert together[language].shape == alone[language].shape
        np.testing.assert_allclose(together[language], alone[language], atol=1e-4, rtol=0)


def test_a_long_text_in_one_language_holds_back_no_other(speakers) -> None:
    french, french_voice = speakers["fr"]
    english, english_voice = speakers["en"]
    long_text = " ".join([TEXTS["fr"]] * 8)
    with QuietWorker(english) as worker:
        long_job = worker.submit(french_voice, long_text, OPTIONS, synthesizer=french)
        wait_until(lambda: long_job.samples > 0)
        short_job = worker.submit(english_voice, "Done.", OPTIONS)
        consumer = threading.Thread(target=lambda: list(long_job.frames()))
        consumer.start()
        assert list(short_job.frames()) and not long_job.done
        long_job.cancel()
        consumer.join(timeout=60)
