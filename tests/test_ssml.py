"""SSML markup read into speech, pauses and boundaries; broken or hostile markup read as
plain text, quickly and without an exception."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wyoming_pocket_tts.normalize.ssml import (
    BREAK_STRENGTHS,
    MAX_PAUSE_SECONDS,
    MAX_RATE,
    MIN_RATE,
    NAMED_RATES,
    Boundary,
    Pause,
    SayAs,
    Speech,
    SsmlDocument,
    parse_ssml,
)

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<speak>&lol9;</speak>"""

# Text in each of the model's languages, with the accents and letters each one needs.
TEXTS = {
    "en": "The café's naïve façade — 20 °C, “quoted”.",
    "fr": "Ça va très bien, l'été à Noël ? Où êtes-vous ?",
    "de": "Grüße aus München: Straße, Bäume und Öfen für Übermorgen.",
    "it": "Perché è così? Città, più, però e caffè.",
    "pt": "Não sei se você está aí, coração; ação e pão.",
    "es": "¿Dónde está el niño? ¡Mañana será el año!",
    "nl": "Één coöperatie, ruïne en geïnteresseerde café's.",
}


def speech(document: SsmlDocument) -> list[str]:
    return [segment.text for segment in document.segments if isinstance(segment, Speech)]


def spoken(document: SsmlDocument) -> str:
    """The words as a caller would join them, with pauses and boundaries as ' | '."""
    out = []
    for segment in document.segments:
        if isinstance(segment, Speech):
            out.append((" " if segment.space_before else "") + segment.text)
        else:
            out.append(" | ")
    return "".join(out)


def only(document: SsmlDocument) -> Speech:
    (segment,) = document.segments
    assert isinstance(segment, Speech)
    return segment


def pauses(document: SsmlDocument) -> list[float]:
    return [segment.seconds for segment in document.segments if isinstance(segment, Pause)]


# --- the root and plain text ------------------------------------------------------------


def test_a_speak_document_speaks_its_text_and_notes_its_language():
    document = parse_ssml('<speak version="1.1" xml:lang="de-DE">Guten Tag</speak>')
    assert document.segments == (Speech("Guten Tag"),)
    assert document.language == "de-DE"
    assert document.malformed is None
    assert document.warning is None


def test_a_fragment_without_speak_is_accepted():
    document = parse_ssml('Hello <break time="200ms"/> world')
    assert document.segments == (Speech("Hello"), Pause(0.2), Speech("world"))
    assert document.language is None
    assert document.malformed is None


def test_an_xml_declaration_and_a_namespace_are_accepted():
    document = parse_ssml(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<speak xmlns="http://www.w3.org/2001/10/synthesis" xml:lang="nl-NL">Hallo</speak>'
    )
    assert document.segments == (Speech("Hallo"),)
    assert document.language == "nl-NL"
    assert parse_ssml("\ufeff<speak>Hallo</speak>").segments == (Speech("Hallo"),)


def test_empty_and_whitespace_only_documents_speak_nothing():
    assert parse_ssml("").segments == ()
    assert parse_ssml("<speak>\n   \t</speak>").segments == ()
    assert parse_ssml("<speak/>").malformed is None


def test_predefined_entities_and_cdata_are_text():
    document = parse_ssml("<speak>Tom &amp; Jerry &lt;3 &#233;t&#xE9; <![CDATA[a < b]]></speak>")
    assert only(document).text == "Tom & Jerry <3 été a < b"


def test_comments_and_processing_instructions_are_not_spoken():
    document = parse_ssml("<speak>one <!-- two --> three<?app ignore?></speak>")
    assert only(document).text == "one three"


# --- whitespace ---------------------------------------------------------------------------


def test_indentation_and_newlines_collapse_to_single_spaces():
    document = parse_ssml("<speak>\n    Turn on\n\t the   kitchen\r\n light\n</speak>")
    assert only(document).text == "Turn on the kitchen light"


def test_inline_tags_do_not_part_words():
    document = parse_ssml("<speak>un<emphasis>believ</emphasis>able</speak>")
    assert only(document).text == "unbelievable"


def test_text_split_across_tags_keeps_one_space_between_words():
    document = parse_ssml(
        "<speak>Call <say-as interpret-as='telephone'> 555 1234 </say-as> now, "
        "<prosody rate='slow'> slowly </prosody> please</speak>"
    )
    assert speech(document) == ["Call", "555 1234", "now,", "slowly", "please"]
    assert spoken(document) == "Call 555 1234 now, slowly please"


def test_no_space_is_invented_where_the_text_had_none():
    document = parse_ssml("<speak>1<say-as interpret-as='ordinal'>2</say-as>x</speak>")
    assert [s.space_before for s in document.segments if isinstance(s, Speech)] == [
        False,
        False,
        False,
    ]


def test_non_breaking_spaces_are_the_text_s_own():
    assert only(parse_ssml("<speak>Ça va\u00a0?</speak>")).text == "Ça va\u00a0?"


# --- breaks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("time_value", "seconds"),
    [("500ms", 0.5), ("1s", 1.0), ("1.5s", 1.5), (" 250 ms ", 0.25), ("2S", 2.0), (".5s", 0.5)],
)
def test_break_times_are_seconds_of_silence(time_value, seconds):
    document = parse_ssml(f'<speak>a<break time="{time_value}"/>b</speak>')
    assert document.segments == (Speech("a"), Pause(pytest.approx(seconds)), Speech("b"))


@pytest.mark.parametrize("strength", ["x-weak", "weak", "medium", "strong", "x-strong"])
def test_break_strengths_are_their_documented_seconds(strength):
    document = parse_ssml(f'<speak>a<break strength="{strength}"/>b</speak>')
    assert pauses(document) == [BREAK_STRENGTHS[strength]]


def test_break_strengths_grow_and_none_is_no_pause():
    seconds = [BREAK_STRENGTHS[s] for s in ("x-weak", "weak", "medium", "strong", "x-strong")]
    assert seconds == sorted(seconds)
    assert parse_ssml('a<break strength="none"/>b').segments == (Speech("a"), Speech("b"))


def test_a_bare_break_is_a_medium_one_and_time_wins_over_strength():
    assert pauses(parse_ssml("a<break/>b")) == [BREAK_STRENGTHS["medium"]]
    assert pauses(parse_ssml('a<break time="300ms" strength="x-strong"/>b')) == [0.3]


def test_a_break_cannot_ask_for_more_than_the_bound():
    assert pauses(parse_ssml('a<break time="3600s"/>b')) == [MAX_PAUSE_SECONDS]
    assert pauses(parse_ssml(f'a<break time="{"9" * 400}s"/>b')) == [MAX_PAUSE_SECONDS]


def test_adjacent_breaks_add_up_to_at_most_the_bound():
    assert pauses(parse_ssml('a<break time="1s"/> <break time="500ms"/>b')) == [1.5]
    assert pauses(parse_ssml("a" + '<break time="4s"/>' * 1000 + "b")) == [MAX_PAUSE_SECONDS]


def test_breaks_at_the_edges_are_kept():
    document = parse_ssml('<speak><break time="1s"/>Hi<break time="2s"/></speak>')
    assert document.segments == (Pause(1.0), Speech("Hi"), Pause(2.0))


def test_a_time_not_understood_falls_back_to_the_strength_and_is_noted():
    document = parse_ssml('a<break time="soon" strength="strong"/>b')
    assert pauses(document) == [BREAK_STRENGTHS["strong"]]
    assert document.ignored == ("ignored break time 'soon'",)
    assert document.warning is not None and "soon" in document.warning
    assert document.malformed is None


def test_a_negative_time_is_not_understood():
    document = parse_ssml('a<break time="-5s"/>b')
    assert pauses(document) == [BREAK_STRENGTHS["medium"]]
    assert document.ignored


# --- prosody rate -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "factor"),
    [("150%", 1.5), ("80%", 0.8), ("+20%", 1.2), ("-10%", 0.9), ("1.25", 1.25), ("100%", 1.0)],
)
def test_rates_are_factors(rate, factor):
    document = parse_ssml(f'<speak><prosody rate="{rate}">hi</prosody></speak>')
    assert only(document).rate == pytest.approx(factor)
    assert not document.rate_clamped


@pytest.mark.parametrize("name", ["x-slow", "slow", "medium", "fast", "x-fast", "default"])
def test_named_rates_are_their_documented_factors(name):
    document = parse_ssml(f'<prosody rate="{name}">hi</prosody>')
    assert only(document).rate == NAMED_RATES[name]


def test_named_rates_grow_from_slow_to_fast():
    names = ("x-slow", "slow", "medium", "fast", "x-fast")
    assert [NAMED_RATES[n] for n in names] == sorted(NAMED_RATES[n] for n in names)


def test_nested_percentages_multiply_and_names_replace():
    document = parse_ssml(
        '<prosody rate="120%">a <prosody rate="+50%">b <prosody rate="slow">c</prosody>'
        "</prosody> d</prosody> e"
    )
    rates = [s.rate for s in document.segments if isinstance(s, Speech)]
    assert rates == pytest.approx([1.2, 1.8, NAMED_RATES["slow"], 1.2, 1.0])
    assert spoken(document) == "a b c d e"


def test_rates_outside_the_range_are_clamped_and_flagged():
    fast = parse_ssml('<prosody rate="300%">hi</prosody>')
    slow = parse_ssml('<prosody rate="-80%">hi</prosody>')
    assert only(fast).rate == MAX_RATE
    assert only(slow).rate == MIN_RATE
    assert fast.rate_clamped and slow.rate_clamped
    assert fast.warning is not None and "clamped" in fast.warning


def test_nesting_into_the_bound_clamps_the_inner_rate_only():
    document = parse_ssml('<prosody rate="x-fast">a <prosody rate="200%">b</prosody></prosody>')
    assert [s.rate for s in document.segments if isinstance(s, Speech)] == [1.5, MAX_RATE]
    assert document.rate_clamped


def test_a_rate_not_understood_leaves_the_rate_and_is_noted():
    document = parse_ssml('<prosody rate="150%"><prosody rate="quick">hi</prosody></prosody>')
    assert only(document).rate == 1.5
    assert document.ignored == ("ignored prosody rate 'quick'",)


def test_prosody_without_a_rate_changes_nothing():
    document = parse_ssml('<prosody pitch="+2st" volume="loud">hi</prosody>')
    assert document.segments == (Speech("hi"),)
    assert document.warning is None


# --- say-as and sub -----------------------------------------------------------------------


def test_say_as_carries_interpret_as_format_and_detail():
    document = parse_ssml(
        '<speak>On <say-as interpret-as="date" format="dmy" detail="1">01/02/2024</say-as>'
        "</speak>"
    )
    assert document.segments == (
        Speech("On"),
        Speech("01/02/2024", say_as=SayAs("date", "dmy", "1"), space_before=True),
    )


def test_adjacent_say_as_elements_stay_apart():
    document = parse_ssml(
        '<say-as interpret-as="characters">AB</say-as><say-as interpret-as="characters">CD'
        "</say-as>"
    )
    assert speech(document) == ["AB", "CD"]


def test_say_as_text_split_by_a_comment_is_one_piece():
    document = parse_ssml('<say-as interpret-as="cardinal">12<!-- x -->34</say-as>')
    assert only(document) == Speech("1234", say_as=SayAs("cardinal"))


def test_say_as_inside_prosody_keeps_the_rate():
    document = parse_ssml(
        '<prosody rate="slow"><say-as interpret-as="ordinal">3</say-as></prosody>'
    )
    assert only(document) == Speech("3", NAMED_RATES["slow"], SayAs("ordinal"))


def test_say_as_without_interpret_as_is_plain_text_and_noted():
    document = parse_ssml("<speak>a <say-as format='x'>42</say-as></speak>")
    assert only(document) == Speech("a 42")
    assert document.ignored == ("ignored <say-as> without interpret-as",)


def test_sub_speaks_its_alias_instead_of_its_content():
    document = parse_ssml('<speak>The <sub alias="World Wide Consortium">W3C</sub> says</speak>')
    assert only(document).text == "The World Wide Consortium says"


def test_sub_content_is_silent_even_its_breaks():
    document = parse_ssml('<sub alias="x">a<break time="2s"/>b</sub>')
    assert document.segments == (Speech("x"),)


def test_sub_without_alias_speaks_its_content():
    document = parse_ssml("<speak><sub>W3C</sub></speak>")
    assert only(document).text == "W3C"
    assert document.ignored


# --- paragraphs and sentences -------------------------------------------------------------


def test_sentences_and_paragraphs_are_boundaries_between_speech():
    document = parse_ssml(
        "<speak>\n  <p>\n    <s>First one</s>\n    <s>Second one</s>\n  </p>\n"
        "  <p>New paragraph</p>\n</speak>"
    )
    assert document.segments == (
        Speech("First one"),
        Boundary("sentence"),
        Speech("Second one"),
        Boundary("paragraph"),
        Speech("New paragraph"),
    )


def test_a_sentence_inside_running_text_is_spoken_on_its_own():
    document = parse_ssml("<speak>before <s>inside</s> after</speak>")
    assert document.segments == (
        Speech("before"),
        Boundary("sentence"),
        Speech("inside"),
        Boundary("sentence"),
        Speech("after"),
    )


def test_long_names_of_paragraph_and_sentence_are_understood():
    document = parse_ssml("<paragraph>a</paragraph><sentence>b</sentence>")
    assert document.segments == (Speech("a"), Boundary("paragraph"), Speech("b"))


def test_empty_paragraphs_leave_no_boundaries():
    document = parse_ssml("<p></p><p> </p><s/><p>only</p><p/>")
    assert document.segments == (Speech("only"),)


def test_a_pause_and_a_boundary_are_both_kept():
    document = parse_ssml('<p>a<break time="1s"/></p><p>b</p>')
    assert document.segments == (Speech("a"), Pause(1.0), Boundary("paragraph"), Speech("b"))


# --- other elements -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "markup",
    [
        '<emphasis level="strong">hello there</emphasis>',
        '<voice name="en-US-Jenny">hello there</voice>',
        '<lang xml:lang="en-GB">hello there</lang>',
        '<phoneme alphabet="ipa" ph="hɛloʊ">hello</phoneme> there',
        'hello <mark name="here"/>there',
        '<audio src="https://example.com/x.mp3">hello there<desc>a bell rings</desc></audio>',
        '<amazon:effect name="whispered">hello there</amazon:effect>',
        "<EMPHASIS>hello</EMPHASIS> there",
        '<foo bar="baz"><w>hello</w> <token>there</token></foo>',
        "<meta name='a' content='b'/><metadata>rdf text</metadata>hello there",
    ],
)
def test_other_elements_speak_their_content(markup):
    document = parse_ssml(f"<speak>{markup}</speak>")
    assert spoken(document) == "hello there"
    assert document.warning is None


def test_prefixed_ssml_elements_are_understood():
    document = parse_ssml('<ssml:speak xmlns:ssml="x">a<ssml:break time="1s"/>b</ssml:speak>')
    assert document.segments == (Speech("a"), Pause(1.0), Speech("b"))


# --- languages ----------------------------------------------------------------------------


@pytest.mark.parametrize("language", sorted(TEXTS))
def test_accented_text_survives_markup(language):
    text = TEXTS[language]
    escaped = text.replace("&", "&amp;").replace("<", "&lt;")
    document = parse_ssml(
        f'<speak xml:lang="{language}"><p><prosody rate="fast">{escaped}</prosody></p>'
        f'<p><sub alias="{escaped}">x</sub></p></speak>'
    )
    assert document.language == language
    assert speech(document) == [text, text]


@pytest.mark.parametrize("language", sorted(TEXTS))
def test_accented_text_survives_malformed_markup(language):
    text = TEXTS[language]
    document = parse_ssml(f"<speak><p>{text}</speak>")
    assert document.malformed is not None
    assert only(document).text == text


def test_emoji_and_other_scripts_survive():
    text = "Licht an 💡 ✅ — 你好 世界 مرحبا 🇳🇱"
    assert only(parse_ssml(f"<speak>{text}</speak>")).text == text


# --- malformed markup ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markup", "text"),
    [
        ("<speak><p>unclosed paragraph</speak>", "unclosed paragraph"),
        ("<speak>no end", "no end"),
        ("closing only</speak>", "closing only"),
        ("<speak><emphasis>crossed</speak></emphasis>", "crossed"),
        ("<speak><break time=500ms/>unquoted</speak>", "unquoted"),
        ('<speak><break time="1s" time="2s"/>twice</speak>', "twice"),
        ("<speak>Tom & Jerry</speak>", "Tom & Jerry"),
        ("<speak>5 < 6 and 7 > 3</speak>", "5 < 6 and 7 > 3"),
        ("<speak>caf&eacute; &nbsp;ok</speak>", "café \u00a0ok"),
        ("just words & a stray ampersand", "just words & a stray ampersand"),
        ("<speak>a</speak><speak", "a <speak"),
        ("<speak>one<!-- unterminated comment", "one"),
        ("<speak>x<![CDATA[kept < text", "xkept < text"),
        ("<<<>>>", "<<<>>>"),
        ("<speak>one<break/>two</speak></speak>", "one two"),
        ("<speak>one<p>two<s>three</speak>", "one two three"),
        ("<speak>&#0;&#xD800;bad refs</speak>", "\ufffd\ufffdbad refs"),
    ],
)
def test_malformed_markup_is_read_as_text_without_tags(markup, text):
    document = parse_ssml(markup)
    assert document.malformed is not None
    assert document.warning is not None and document.malformed in document.warning
    assert spoken(document) == text


def test_control_characters_make_markup_malformed_but_never_raise():
    document = parse_ssml("<speak>bell\x07 and nul\x00 here</speak>")
    assert document.malformed is not None
    assert "bell" in only(document).text


def test_lone_surrogates_never_raise():
    document = parse_ssml("<speak>broken \ud800 text</speak>")
    assert document.malformed is not None
    assert only(document).text == "broken \ud800 text"


def test_a_malformed_document_keeps_its_line_in_the_message():
    document = parse_ssml("<speak>\nfine\n<p>bad</s>\n</speak>")
    assert document.malformed is not None and "line 3" in document.malformed


def test_few_ignored_values_are_noted_however_many_are_bad():
    markup = "".join(f'<prosody rate="bad{i}">w</prosody>' for i in range(100))
    document = parse_ssml(markup)
    assert 0 < len(document.ignored) <= 5
    assert only(document).text == "w" * 100


def test_ignored_values_are_quoted_short():
    document = parse_ssml(f'<prosody rate="{"z" * 10_000}">w</prosody>')
    assert document.warning is not None and len(document.warning) < 200


# --- hostile markup -----------------------------------------------------------------------


@pytest.mark.wall_clock
def test_billion_laughs_is_refused_quickly():
    started = time.perf_counter()
    document = parse_ssml(BILLION_LAUGHS)
    assert time.perf_counter() - started < 2.0
    assert document.malformed == "DOCTYPE and ENTITY declarations are refused"
    assert "lollol" not in spoken(document)
    assert len(spoken(document)) < 100


def test_external_entities_are_never_read():
    document = parse_ssml(
        '<!DOCTYPE speak [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><speak>&xxe;</speak>'
    )
    assert document.malformed == "DOCTYPE and ENTITY declarations are refused"
    assert "root:" not in spoken(document)


def test_a_doctype_without_entities_is_refused_too():
    document = parse_ssml("<!DOCTYPE speak><speak>hi</speak>")
    assert document.malformed == "DOCTYPE and ENTITY declarations are refused"
    assert spoken(document) == "hi"


@pytest.mark.wall_clock
@pytest.mark.parametrize(
    "markup",
    [
        "<a" * 200_000,
        "<!--" * 200_000,
        "<!DOCTYPE [" * 100_000,
        "<![CDATA[" * 100_000,
        "<?" * 200_000,
        "<p>" * 100_000 + "deep" + "</p>" * 100_000,
        "<p>" * 100_000 + "deep, never closed",
        "&" * 400_000,
        "&amp" * 100_000,
        '<prosody rate="+1%">' * 50_000 + "x",
        "<break/>" * 100_000,
        "word " * 200_000,
        "<s>w</s>" * 100_000,
        "<a " + 'b="c" ' * 100_000 + ">",
    ],
    ids=lambda markup: repr(markup[:12]),
)
def test_enormous_hostile_markup_is_read_in_linear_time(markup):
    started = time.perf_counter()
    document = parse_ssml(markup)
    assert time.perf_counter() - started < 20.0
    assert isinstance(document, SsmlDocument)


# --- properties ---------------------------------------------------------------------------

FRAGMENTS = st.sampled_from(
    [
        "<speak>", "</speak>", "<p>", "</p>", "<s>", "</s>", "<break/>", '<break time="1s"/>',
        '<prosody rate="150%">', "</prosody>", '<say-as interpret-as="date">', "</say-as>",
        '<sub alias="a">', "</sub>", "<emphasis>", "</emphasis>", "&amp;", "&", "<", ">",
        "<!--", "-->", "<![CDATA[", "]]>", "<!DOCTYPE x [", "]>", "<?", "?>", " ", "\n",
        "été", "😀", "\x00", "word",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_parses_without_an_exception(markup):
    document = parse_ssml(markup)
    for segment in document.segments:
        assert isinstance(segment, Speech | Pause | Boundary)
        if isinstance(segment, Speech):
            assert segment.text and segment.text == segment.text.strip(" \t\r\n")
            assert MIN_RATE <= segment.rate <= MAX_RATE
        if isinstance(segment, Pause):
            assert 0 < segment.seconds <= MAX_PAUSE_SECONDS


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAGMENTS | st.text(max_size=5), max_size=30).map("".join))
def test_any_mix_of_markup_parses_without_an_exception(markup):
    document = parse_ssml(markup)
    assert isinstance(document, SsmlDocument)
    assert (document.warning is None) == (
        document.malformed is None and not document.rate_clamped and not document.ignored
    )


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(exclude_characters="<&>", exclude_categories=("Cs", "Cc", "Cn"))))
def test_text_without_markup_is_spoken_as_it_is(text):
    expected = " ".join(word for word in text.split(" ") if word)
    document = parse_ssml(text)
    assert document.malformed is None
    assert spoken(document) == expected
