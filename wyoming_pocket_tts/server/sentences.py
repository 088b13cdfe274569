"""Sentences out of text that arrives in pieces, as Home Assistant streams an LLM's answer.

Finding sentence ends is `sentence-stream`'s job (abbreviations, closing quotes, CJK
enders, blank lines); this module adds what a speech model needs on top of it. A piece
with very few words ("Sure!", "OK.") makes the model guess its prosody from almost
nothing and costs a full prompt prefill for a fraction of a second of audio, so such
pieces are held back and spoken together with the sentence that follows them.
"""

from __future__ import annotations

import unicodedata

from sentence_stream import SentenceBoundaryDetector

#: A piece with fewer words than this waits to be joined to the next sentence.
MIN_WORDS = 3


def word_count(text: str) -> int:
    """Words as the model hears them: scripts written without spaces (Chinese, Japanese)
    count one word per wide character, as a space-separated word would."""
    return sum(
        max(1, sum(unicodedata.east_asian_width(char) in "WF" for char in token))
        for token in text.split()
    )


class SentenceStream:
    """Feeds text in as it arrives; hands sentences out as soon as they are complete."""

    def __init__(self, min_words: int = MIN_WORDS) -> None:
        self._detector = SentenceBoundaryDetector()
        self._min_words = min_words
        self._held = ""

    def add(self, text: str) -> list[str]:
        """The sentences that `text` completed, short ones merged into their successor."""
        ready = []
        for sentence in self._detector.add_chunk(text):
            self._held = f"{self._held} {sentence}".strip()
            if word_count(self._held) >= self._min_words:
                ready.append(self._held)
                self._held = ""
        return ready

    def finish(self) -> str:
        """Everything not yet handed out (held pieces and an unterminated tail), or ''."""
        rest = f"{self._held} {self._detector.finish()}".strip()
        self._held = ""
        return rest
