"""The catalog against the reference package: every model, voice and hub location it knows."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from wyoming_pocket_tts.catalog import CatalogError, HubFile, find_model, load_catalog, parse_hf_url

# Without the reference package the whole module is skipped, before its imports fail.
pocket_tts = pytest.importorskip("pocket_tts")
from pocket_tts.default_parameters import (  # noqa: E402
    DEFAULT_LANGUAGE,
    get_default_voice_for_language,
)
from pocket_tts.utils.utils import (  # noqa: E402
    _ORIGINS_OF_PREDEFINED_VOICES,
    get_predefined_voice,
)

REFERENCE_CONFIGS = Path(pocket_tts.__file__).parent / "config"
LANGUAGE_CODES = {
    "english": "en",
    "french": "fr",
    "german": "de",
    "italian": "it",
    "portuguese": "pt",
    "spanish": "es",
    "dutch": "nl",
}


def _reference_names() -> list[str]:
    return sorted(path.stem for path in REFERENCE_CONFIGS.glob("*.yaml"))


def test_catalog_has_exactly_the_reference_models() -> None:
    assert sorted(load_catalog().model_names) == _reference_names()


@pytest.mark.parametrize("name", _reference_names())
def test_packaged_config_holds_the_reference_data(name: str) -> None:
    entry = find_model(name)
    ours = yaml.safe_load(entry.config_path.read_text(encoding="utf-8"))
    reference = yaml.safe_load((REFERENCE_CONFIGS / f"{name}.yaml").read_text(encoding="utf-8"))
    assert ours == reference
    assert entry.weights == parse_hf_url(reference["weights_path"])
    assert entry.weights_without_cloning == parse_hf_url(
        reference["weights_path_without_voice_cloning"]
    )
    assert entry.tokenizer == parse_hf_url(reference["flow_lm"]["lookup_table"]["tokenizer_path"])


@pytest.mark.parametrize("name", _reference_names())
def test_language_voices_and_default_voice_match_the_reference(name: str) -> None:
    entry = find_model(name)
    assert entry.language == LANGUAGE_CODES[name.split("_")[0]]
    assert set(entry.voice_names) == set(_ORIGINS_OF_PREDEFINED_VOICES)
    assert entry.default_voice == get_default_voice_for_language(name)
    for voice in entry.voices:
        assert voice.state == parse_hf_url(get_predefined_voice(name, voice.name))


def test_default_model_and_alias() -> None:
    catalog = load_catalog()
    assert catalog.default_model == DEFAULT_LANGUAGE
    alias = find_model(DEFAULT_LANGUAGE)
    target = find_model(alias.same_as or "")
    assert alias.weights.revision == target.weights.revision
    assert alias.weights_without_cloning.revision == target.weights_without_cloning.revision


def test_every_voice_names_a_catalog_language() -> None:
    languages = {entry.language for entry in load_catalog().models}
    for voice in find_model("english").voices:
        assert voice.language in languages, voice
        assert voice.description


def test_parse_hf_url_round_trip() -> None:
    url = "hf://kyutai/pocket-tts/languages/english/model.safetensors@db04f0e6"
    hub_file = parse_hf_url(url)
    assert hub_file == HubFile(
        "kyutai/pocket-tts", "languages/english/model.safetensors", "db04f0e6"
    )
    assert hub_file.url == url


@pytest.mark.parametrize(
    "url",
    [
        "https://huggingface.co/kyutai/pocket-tts/model.safetensors",
        "hf://kyutai/pocket-tts/model.safetensors",
        "hf://kyutai/pocket-tts/model.safetensors@",
        "hf://kyutai/model.safetensors@abc",
        "hf://kyutai//model.safetensors@abc",
    ],
)
def test_parse_hf_url_rejects_malformed(url: str) -> None:
    with pytest.raises(CatalogError, match="hf://"):
        parse_hf_url(url)


def test_unknown_model_lists_close_matches() -> None:
    with pytest.raises(CatalogError) as caught:
        find_model("english_2026_10")
    message = str(caught.value)
    assert "'english_2026_10'" in message
    assert "english_2026-10" in message
    assert "list-models" in message


def test_unknown_model_without_close_matches_says_so_plainly() -> None:
    with pytest.raises(CatalogError) as caught:
        find_model("klingon")
    assert "did you mean" not in str(caught.value)


def test_unknown_voice_lists_close_matches() -> None:
    with pytest.raises(CatalogError) as caught:
        find_model("french").voice("estele")
    assert "estelle" in str(caught.value)
    assert "list-voices" in str(caught.value)
