"""Errors the engine raises for bad input, each with a message fit to show a user.

Everything the engine rejects (a text, a file, a checkpoint) raises a subclass of
`EngineError`, so callers catch one type and print its message instead of a traceback.
"""


class EngineError(Exception):
    """Base class: the message says what is wrong and, where it can, how to fix it."""


class ConfigError(EngineError):
    """A model configuration file is missing, unreadable or inconsistent."""


class CheckpointError(EngineError):
    """A weights file is missing, corrupt, or does not match the model's configuration."""


class TokenizerError(EngineError):
    """A tokenizer file is missing, unreadable, or of the wrong vocabulary size."""


class TextError(EngineError):
    """A text cannot be synthesized (for instance, it is empty)."""


class VoiceError(EngineError):
    """A voice (audio prompt or voice-state file) cannot be used with this model."""
