"""One module per subcommand of `wyoming-pocket-tts` (see `__main__.py`)."""
