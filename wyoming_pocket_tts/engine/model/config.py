"""Model hyperparameters as typed dataclasses, read from pocket-tts YAML configs.

The YAML files shipped with pocket-tts (`pocket_tts/config/*.yaml`) are the source of
truth for every model family; we read them unchanged. Unknown keys are an error, so a
config written for a newer engine fails loudly instead of silently misbuilding a model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dacite
import yaml

from ..errors import ConfigError

FLOW_HEAD_TYPES = ("lsd", "flow_matching", "drifting", "pointwise")


@dataclass(frozen=True)
class FlowHeadConfig:
    """The small MLP that turns a transformer output into the next latent frame."""

    dim: int
    depth: int
    # lsd: two time conditions, one step from noise; flow_matching: one time
    # condition, Euler steps; drifting / pointwise: no time condition.
    type: str = "lsd"

    @property
    def num_time_conditions(self) -> int:
        return {"lsd": 2, "flow_matching": 1}.get(self.type, 0)


@dataclass(frozen=True)
class FlowTransformerConfig:
    d_model: int
    num_heads: int
    num_layers: int
    hidden_scale: int = 4
    max_period: float = 10_000.0
    # Grouped-query attention: queries are attn_dim wide, keys/values have
    # num_kv_heads heads. Both default to plain multi-head attention.
    attn_dim: int | None = None
    num_kv_heads: int | None = None
    dim_feedforward: int | None = None

    @property
    def attention_width(self) -> int:
        return self.attn_dim or self.d_model

    @property
    def head_dim(self) -> int:
        return self.attention_width // self.num_heads

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    @property
    def ffn_dim(self) -> int:
        return self.dim_feedforward or self.d_model * self.hidden_scale


@dataclass(frozen=True)
class LookupTableConfig:
    """Text token embeddings; `rank` makes the table low-rank with a projection."""

    dim: int
    n_bins: int
    tokenizer_path: str
    tokenizer: str = "sentencepiece"
    rank: int | None = None


@dataclass(frozen=True)
class FlowLMConfig:
    flow: FlowHeadConfig
    transformer: FlowTransformerConfig
    lookup_table: LookupTableConfig
    dtype: str = "float32"
    # Width of the backbone output seen by the flow and EOS heads (a projection
    # from d_model when set).
    z_dim: int | None = None
    weights_path: str | None = None
    insert_bos_before_voice: bool = False


@dataclass(frozen=True)
class SEANetConfig:
    dimension: int
    channels: int
    n_filters: int
    n_residual_layers: int
    ratios: tuple[int, ...]
    kernel_size: int
    residual_kernel_size: int
    last_kernel_size: int
    dilation_base: int
    pad_mode: str
    compress: int

    @property
    def hop_length(self) -> int:
        hop = 1
        for ratio in self.ratios:
            hop *= ratio
        return hop


@dataclass(frozen=True)
class MimiTransformerConfig:
    d_model: int
    input_dimension: int
    output_dimensions: tuple[int, ...]
    num_heads: int
    num_layers: int
    layer_scale: float
    context: int
    dim_feedforward: int
    max_period: float = 10_000.0


@dataclass(frozen=True)
class QuantizerConfig:
    dimension: int
    output_dimension: int


@dataclass(frozen=True)
class MimiConfig:
    sample_rate: int
    channels: int
    frame_rate: float
    seanet: SEANetConfig
    transformer: MimiTransformerConfig
    quantizer: QuantizerConfig
    dtype: str = "float32"
    weights_path: str | None = None
    inner_dim: int | None = None
    outer_dim: int | None = None
    # The small models decode with their own, narrower SEANet and transformer.
    decoder_seanet: SEANetConfig | None = None
    decoder_transformer: MimiTransformerConfig | None = None

    @property
    def decoder_seanet_config(self) -> SEANetConfig:
        return self.decoder_seanet or self.seanet

    @property
    def decoder_transformer_config(self) -> MimiTransformerConfig:
        return self.decoder_transformer or self.transformer

    @property
    def encoder_frame_rate(self) -> float:
        return self.sample_rate / self.seanet.hop_length

    @property
    def samples_per_frame(self) -> int:
        return int(self.sample_rate / self.frame_rate)

    @property
    def latent_dim(self) -> int:
        return self.quantizer.dimension


@dataclass(frozen=True)
class ModelConfig:
    flow_lm: FlowLMConfig
    mimi: MimiConfig
    weights_path: str | None = None
    weights_path_without_voice_cloning: str | None = None
    pad_with_spaces_for_short_inputs: bool = False
    remove_semicolons: bool = False
    append_terminal_punctuation: bool = True
    capitalize_first_letter: bool = True
    replace_characters: dict[str, str] = field(default_factory=dict)
    model_recommended_frames_after_eos: int | None = None
    default_temperature: float = 0.3
    default_eos_threshold: float = -4.0
    # Where the YAML came from: relative file paths in it are relative to its folder.
    source: Path | None = None

    @property
    def name(self) -> str:
        return self.source.stem if self.source is not None else "custom"

    def resolve_path(self, value: str) -> str:
        """A path from the YAML, made absolute against the YAML's folder; URLs unchanged."""
        if "://" in value or self.source is None or Path(value).is_absolute():
            return value
        return str((self.source.parent / value).resolve())


def _check_consistency(config: ModelConfig) -> None:
    flow, transformer = config.flow_lm.flow, config.flow_lm.transformer
    if flow.type not in FLOW_HEAD_TYPES:
        raise ConfigError(
            f"unknown flow head type {flow.type!r}; expected one of {', '.join(FLOW_HEAD_TYPES)}"
        )
    if transformer.attention_width % transformer.num_heads:
        raise ConfigError("flow_lm.transformer: attention width must be a multiple of num_heads")
    if transformer.num_heads % transformer.kv_heads:
        raise ConfigError("flow_lm.transformer: num_heads must be a multiple of num_kv_heads")
    if transformer.head_dim % 2:
        raise ConfigError("flow_lm.transformer: the head dimension must be even for RoPE")
    if config.mimi.encoder_frame_rate % config.mimi.frame_rate:
        raise ConfigError("mimi: the encoder frame rate must be a multiple of frame_rate")


def model_config_from_dict(data: dict[str, Any], source: Path | None = None) -> ModelConfig:
    """Build a `ModelConfig` from parsed YAML, rejecting unknown or mistyped keys."""
    try:
        config = dacite.from_dict(
            ModelConfig,
            {**data, "source": source},
            config=dacite.Config(strict=True, cast=[tuple], type_hooks={float: float}),
        )
    except dacite.DaciteError as error:
        where = f" in {source}" if source else ""
        raise ConfigError(f"invalid model configuration{where}: {error}") from error
    _check_consistency(config)
    return config


def load_model_config(path: str | Path) -> ModelConfig:
    """Read a pocket-tts YAML model configuration from a local file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"model configuration not found: {path}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise ConfigError(f"cannot read model configuration {path}: {error}") from error
    if not isinstance(data, dict):
        raise ConfigError(f"model configuration {path} is not a YAML mapping")
    return model_config_from_dict(data, source=path.resolve())


def replace(config: ModelConfig, **changes: Any) -> ModelConfig:
    """A copy of `config` with some top-level fields changed (e.g. resolved file paths)."""
    return dataclasses.replace(config, **changes)
