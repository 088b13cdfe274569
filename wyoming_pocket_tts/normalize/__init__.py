"""Text normalisation: what Home Assistant writes, as a person would say it.

`normalize(text, language)` writes out numbers, units, dates, times, amounts of
money, abbreviations and symbols in words of one of `SUPPORTED_LANGUAGES`;
`say_as(text, interpret_as, language)` reads a text as one kind of thing (SSML's
say-as). num2words says the numbers; the rules around them are ours, one module
per language under `languages/`.
"""

from wyoming_pocket_tts.normalize.languages import SUPPORTED_LANGUAGES
from wyoming_pocket_tts.normalize.pipeline import normalize
from wyoming_pocket_tts.normalize.say_as import say_as

__all__ = ["SUPPORTED_LANGUAGES", "normalize", "say_as"]
