"""Sentence boundaries found while text streams in, short pieces merged."""

from wyoming_pocket_tts.server.sentences import SentenceStream, word_count


def feed(stream: SentenceStream, pieces: list[str]) -> list[str]:
    sentences = []
    for piece in pieces:
        sentences.extend(stream.add(piece))
    return sentences


def test_a_sentence_is_ready_as_soon_as_the_next_one_begins():
    stream = SentenceStream()
    assert stream.add("The kitchen lights are ") == []
    assert stream.add("now on.") == []  # could still be an abbreviation or a decimal
    assert stream.add(" The door") == ["The kitchen lights are now on."]
    assert stream.finish() == "The door"


def test_text_split_mid_word_reassembles():
    stream = SentenceStream()
    pieces = ["It is twen", "ty degrees in", "side. It will r", "ain later tod", "ay."]
    assert feed(stream, pieces) == ["It is twenty degrees inside."]
    assert stream.finish() == "It will rain later today."


def test_short_pieces_wait_for_the_next_sentence():
    stream = SentenceStream()
    sentences = feed(stream, ["Sure! ", "OK. ", "I have turned off the fan. ", "Anything else?"])
    assert sentences == ["Sure! OK. I have turned off the fan."]
    assert stream.finish() == "Anything else?"


def test_a_short_piece_at_the_end_is_still_spoken():
    # The sentence before it is already out (maybe half spoken): the tail goes alone.
    stream = SentenceStream()
    assert feed(stream, ["The garage door is closed. ", "Done."]) == ["The garage door is closed."]
    assert stream.finish() == "Done."


def test_held_short_piece_is_flushed_by_finish():
    stream = SentenceStream()
    assert feed(stream, ["Yes. ", "Yes. ", "Maybe"]) == []
    assert stream.finish() == "Yes. Yes. Maybe"


def test_finish_on_empty_stream_is_empty_and_stream_is_reusable():
    stream = SentenceStream()
    assert stream.finish() == ""
    assert feed(stream, ["   "]) == []
    assert stream.finish() == ""
    assert feed(stream, ["One two three. ", "Four five six."]) == ["One two three."]
    assert stream.finish() == "Four five six."


def test_abbreviations_do_not_end_a_sentence():
    stream = SentenceStream()
    sentences = feed(stream, ["Dr. Smith called about the results. ", "He will call again."])
    assert sentences == ["Dr. Smith called about the results."]


def test_min_words_is_configurable():
    stream = SentenceStream(min_words=1)
    assert feed(stream, ["Hello. ", "Thanks. ", "No"]) == ["Hello.", "Thanks."]


def test_word_count_counts_wide_characters_as_words():
    assert word_count("Turn on the lights.") == 4
    assert word_count("Größe.") == 1
    assert word_count("今日は晴れです。") >= 7
    assert word_count("  ") == 0
