"""Pocket TTS in plain PyTorch: FlowLM, the Mimi codec, and the streaming synthesizer.

Nothing in this package knows about Wyoming; the server talks to it through
`synthesizer` and `voice`. Importing it changes nothing in the process: a command
sets the process up first with `cpu.process.prepare_process`.
"""
