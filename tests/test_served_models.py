"""`--model [LANG=]NAME|PATH`, given once per language a server speaks."""

from __future__ import annotations

import pytest

from wyoming_pocket_tts.catalog import CatalogError, load_catalog
from wyoming_pocket_tts.resolve import ModelOptions, served_models

BASE = ModelOptions(quantize=True)
CATALOG_MODELS = {
    "en": "english", "fr": "french", "de": "german_24l", "it": "italian",
    "pt": "portuguese", "es": "spanish", "nl": "dutch",
}


def _spoken(choices: list[str], yaml_language: str = "en") -> list[tuple[str, str | None]]:
    return [
        (options.languages[0], options.model)
        for options in served_models(choices, BASE, yaml_language)
    ]


def test_no_model_is_the_catalogs_default() -> None:
    default = load_catalog().default_model
    assert _spoken([]) == [(load_catalog().find_model(default).language, default)]


@pytest.mark.parametrize("language", sorted(CATALOG_MODELS))
def test_a_plain_catalog_name_speaks_its_own_language(language: str) -> None:
    assert _spoken([CATALOG_MODELS[language]]) == [(language, CATALOG_MODELS[language])]


def test_every_language_at_once_in_the_order_given() -> None:
    choices = [f"{language}={name}" for language, name in CATALOG_MODELS.items()]
    assert _spoken(choices) == list(CATALOG_MODELS.items())


def test_the_shared_options_go_to_every_model() -> None:
    served = served_models(["french", "de=german"], BASE)
    assert all(options.quantize for options in served)


@pytest.mark.parametrize("language", sorted(CATALOG_MODELS))
def test_a_yaml_path_speaks_the_language_given(language: str) -> None:
    assert _spoken([f"{language}=/models/custom.yaml"]) == [(language, "/models/custom.yaml")]
    assert _spoken(["/models/custom.yaml"], yaml_language=language) == [
        (language, "/models/custom.yaml")
    ]


def test_a_path_with_an_equals_sign_is_a_path() -> None:
    assert _spoken(["./my=models/custom.yaml"]) == [("en", "./my=models/custom.yaml")]


def test_a_yaml_path_beside_a_catalog_model_is_english_by_default() -> None:
    assert _spoken(["french", "/models/other.yaml"]) == [
        ("fr", "french"), ("en", "/models/other.yaml")
    ]
    with pytest.raises(CatalogError, match="fr is already spoken by french"):
        served_models(["french", "/models/other.yaml"], BASE, yaml_language="fr")


def test_the_language_code_is_case_blind() -> None:
    assert _spoken(["FR=french"]) == [("fr", "french")]


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        (["xx=french"], "unknown language 'xx' \\(the models speak en, fr, de"),
        (["fr=english"], "model 'english' speaks en, not fr"),
        (["english", "en=english_2026-09"], "en is already spoken by english"),
        (["fr="], "no model after fr="),
        (["fr=frnch"], "did you mean french"),
    ],
)
def test_impossible_choices_say_what_is_wrong(choices: list[str], message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        served_models(choices, BASE)
