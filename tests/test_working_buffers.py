"""Working buffers: a long-running server's memory must not grow with what it served."""

from __future__ import annotations

from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.synthesizer import MAX_SPARE_CACHES, Synthesizer

OPTIONS = GenerationOptions(temperature=0.0, max_frames_per_chunk=4)
SHORT = "Done."
LONG = "The kitchen light is on, the hall light is off, and the front door is locked now."


def speak_together(synthesizer: Synthesizer, voice, texts: list[str]) -> None:
    """Start every text, then step them all to the end (buffers are taken at the start)."""
    utterances = [synthesizer.start(voice, text, OPTIONS) for text in texts]
    for utterance in utterances:
        utterance.next_latent()
    for utterance in utterances:
        while utterance.next_latent() is not None:
            pass


def test_spare_buffers_stay_bounded_after_a_busy_moment(model, voice) -> None:
    alone = Synthesizer(model)
    speak_together(alone, voice, [LONG])
    one_long = alone.buffers.spare_bytes
    assert one_long > 0  # the buffer is kept for the next request

    synthesizer = Synthesizer(model)
    speak_together(synthesizer, voice, [LONG] * 6)  # six at once, each a long text
    busy = synthesizer.buffers.spare_bytes
    assert busy <= MAX_SPARE_CACHES * one_long  # not one buffer per request of that moment

    for _ in range(3):  # short requests again: the buffers they use do not grow
        speak_together(synthesizer, voice, [SHORT])
    assert synthesizer.buffers.spare_bytes <= busy


def test_a_short_text_reuses_a_buffer_without_growing_it(model, voice) -> None:
    synthesizer = Synthesizer(model)
    speak_together(synthesizer, voice, [SHORT, LONG])
    held = synthesizer.buffers.spare_bytes
    for _ in range(5):
        speak_together(synthesizer, voice, [SHORT, LONG])
        assert synthesizer.buffers.spare_bytes == held
