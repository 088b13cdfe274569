"""The languages normalisation speaks, one module each: adding a language is adding a
module here, with its `LOCALE`, and its code to `SUPPORTED_LANGUAGES`."""

from __future__ import annotations

import importlib

from wyoming_pocket_tts.normalize.locale import Locale

SUPPORTED_LANGUAGES = ("de", "en", "es", "fr", "it", "nl", "pt")


def locale_for(language: str) -> Locale:
    """The rules for a language code ("fr"; a region such as "fr-CH" or "fr_CH" is
    ignored). Raises ValueError for a language without rules."""
    code = language.replace("_", "-").split("-")[0].lower()
    if code not in SUPPORTED_LANGUAGES:
        raise ValueError(
            f"no normalisation rules for language {language!r}; "
            f"supported: {', '.join(SUPPORTED_LANGUAGES)}"
        )
    module = importlib.import_module(f"{__name__}.{code}")
    locale: Locale = module.LOCALE
    return locale
