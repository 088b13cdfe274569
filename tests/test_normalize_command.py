"""`wyoming-pocket-tts normalize`: one text, or standard input line by line, in a pipe."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
import threading

import pytest

from wyoming_pocket_tts.__main__ import run


def test_prints_the_spoken_form_of_one_text(capsys: pytest.CaptureFixture[str]):
    assert run(["normalize", "--language", "fr", "--text", "Il fait 21,5 °C"]) == 0
    assert capsys.readouterr().out == "Il fait vingt et un virgule cinq degrés Celsius\n"


def test_prints_one_line_out_per_line_in_in_order(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setattr(sys, "stdin", io.StringIO("It is 21.5 °C\n\nWind 15 km/h\r\nat 07:30"))
    assert run(["normalize", "--language", "en"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "It is twenty-one point five degrees Celsius",
        "",
        "Wind fifteen kilometers per hour",
        "at seven thirty a.m.",
    ]


def test_refuses_a_language_without_rules(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exited:
        run(["normalize", "--language", "sv", "--text", "5 km"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "invalid choice: 'sv'" in error and "{de,en,es,fr,it,nl,pt}" in error


def test_answers_each_line_before_the_next_arrives_without_torch():
    """In a pipe, each line's answer comes out while standard input is still open, and
    the command never loads torch."""
    script = textwrap.dedent(
        """
        import sys
        from wyoming_pocket_tts.__main__ import run
        code = run(["normalize", "--language", "de"])
        print("torch loaded" if "torch" in sys.modules else "no torch", flush=True)
        sys.exit(code)
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, encoding="utf-8",
    )
    assert process.stdin is not None and process.stdout is not None
    # A hung command fails the test instead of hanging it.
    watchdog = threading.Timer(120, process.kill)
    watchdog.start()
    try:
        answers = []
        for line in ("Es sind 1.234,5 kWh\n", "am 9. Dezember um 19:05 Uhr\n"):
            process.stdin.write(line)
            process.stdin.flush()
            answers.append(process.stdout.readline())
        process.stdin.close()
        rest = process.stdout.read()
        assert process.wait() == 0
    finally:
        watchdog.cancel()
    assert answers == [
        "Es sind eintausendzweihundertvierunddreißig Komma fünf Kilowattstunden\n",
        "am neunten Dezember um neunzehn Uhr fünf\n",
    ]
    assert rest == "no torch\n"
