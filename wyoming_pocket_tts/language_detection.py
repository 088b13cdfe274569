"""Which of the served languages a text is written in, for a request that names no voice.

`py3langid` (a small naive Bayes model over byte n-grams, pure Python and numpy) does
the detecting, restricted to the languages the server speaks. A short answer such as
"Done." or "OK" says too little to tell French from Italian, so a guess is taken only
from a few words up and with high confidence; otherwise the default language speaks.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from py3langid.langid import LanguageIdentifier

#: Fewer words than this, and the text says too little to be told apart.
MIN_WORDS = 2
#: The detector's probability (over the served languages) that a guess must reach.
MIN_CONFIDENCE = 0.8


@functools.cache
def _identifier() -> LanguageIdentifier:
    """The model, loaded once per process (about a second) and only when needed."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


class LanguageDetector:
    """Tells which of `languages` a text is in; `default` where it cannot tell.

    Made with more than one language, it loads the model (a second, the first time in
    the process): make it at start-up, not on the event loop.
    """

    def __init__(self, languages: Sequence[str], default: str) -> None:
        if default not in languages:
            raise ValueError(f"the default language {default!r} is not among {list(languages)}")
        self.languages = tuple(languages)
        self.default = default
        self._identifier: LanguageIdentifier | None = None
        if len(self.languages) > 1:
            # A copy restricted to these languages; the full model's tables are shared.
            self._identifier = copy.copy(_identifier())
            self._identifier.set_languages(list(self.languages))

    def detect(self, text: str) -> str:
        if self._identifier is None or len(text.split()) < MIN_WORDS:
            return self.default
        language, confidence = self._identifier.classify(text)
        return language if confidence >= MIN_CONFIDENCE else self.default
