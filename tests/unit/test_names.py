"""A word the model finishes into a name the window or the workspace spells is shown at least to the name's end."""
from __future__ import annotations

from tabd.predictor.text.names import KNOWN_NAME_P, LIKELIEST_NAME_P, KnownNames
from tabd.predictor.text.postprocess import completed_name, floor_at, gate
from tabd.predictor.types import ContextChunk, GenSettings

# the model finishes `term_` into `term_len(text)`, unsure of the name's first token
TEXT = "len(text)"
UNSURE = ((3, 0.3), (4, 0.9), (8, 0.9), (9, 0.9))


def test_completed_name_is_the_word_the_cursor_is_in_carried_to_its_end():
    assert completed_name("    width = term_", "len(text)") == ("term_len", 3)
    assert completed_name("    width = term_", "len") == ("term_len", 3)  # the suggestion ends with the word
    assert completed_name("    width = ", "term_len(text)") is None  # no word under way at the cursor
    assert completed_name("    width = term_", "(text)") is None  # nothing of the word in the suggestion
    assert completed_name("    x = 12", "34") is None  # a number, not a name
    assert completed_name("    width = term_", "len", line_after="gth") is None  # the cursor is inside a word


def test_floor_makes_the_name_certain_and_judges_the_rest_from_there():
    floored = floor_at(UNSURE, 3)
    assert floored == ((3, 1.0), (4, 0.9), (8, 0.9), (9, 0.9))
    assert gate(TEXT, UNSURE, 0.4) == ""  # unsure of the first token: nothing shown
    assert gate(TEXT, floored, 0.4) == "len(text)"  # 0.9^3 = 0.73 after the name
    assert gate(TEXT, floored, 0.85) == "len("  # 0.9 after the name, then 0.81
    # a name that ends inside a token: a mark at its end, so the gate can stop there
    assert floor_at(((2, 0.5), (5, 0.2)), 3) == ((2, 1.0), (3, 1.0), (5, 0.2))


def test_a_floor_under_one_is_the_name_s_joint_and_the_rest_must_earn_its_place():
    floored = floor_at(UNSURE, 3, 0.6)
    assert floored == ((3, 0.6), (4, 0.9), (8, 0.9), (9, 0.9))
    assert gate(TEXT, floored, 0.45) == "len(text"  # 0.6 * 0.9 * 0.9 = 0.49 >= 0.45; times 0.9 again is under
    assert gate(TEXT, floored, 0.59) == "len"  # the name alone: the model is unsure of what follows it
    sure = ((3, 0.95), (9, 0.9))
    assert floor_at(sure, 3, 0.6) == sure  # the model is surer than the floor: its own marks


def test_a_name_an_open_file_spells_lifts_the_gate_and_an_unknown_one_does_not():
    known = KnownNames()
    other = [ContextChunk("click/_compat.py", "def term_len(x: str) -> int:\n    return len(strip_ansi(x))\n", True)]
    prefix, suffix = "    width = term_", "\n"
    assert known.floor(prefix, suffix, TEXT, UNSURE, other) == floor_at(UNSURE, 3, KNOWN_NAME_P)
    assert known.floor(prefix, suffix, TEXT, UNSURE, []) is None  # spelled nowhere: the model's own marks
    # spelled in the window itself (above the cursor, or after it)
    assert known.floor("n = term_len(a)\n" + prefix, suffix, TEXT, UNSURE, []) == floor_at(UNSURE, 3, KNOWN_NAME_P)
    assert known.floor(prefix, "\nprint(term_len)\n", TEXT, UNSURE, []) == floor_at(UNSURE, 3, KNOWN_NAME_P)
    # a whole word only: `term_length` does not spell `term_len`
    longer = [ContextChunk("a.py", "term_length = 3\n")]
    assert known.floor(prefix, suffix, TEXT, UNSURE, longer) is None


def test_short_names_and_engines_without_probabilities_are_left_alone():
    known = KnownNames()
    ctx = [ContextChunk("a.py", "abc = 1\n")]
    assert known.floor("x = ab", "", "c + 1", ((1, 0.1), (5, 0.9)), ctx) is None  # 3 characters
    assert known.floor("    width = term_", "", TEXT, (), ctx) is None


def test_the_names_of_a_text_are_found_once_and_the_memory_is_bounded():
    known = KnownNames(keep=2)
    texts = [f"name_{i} = {i}\n" for i in range(3)]
    for t in texts:
        known.names_in(t)
    assert len(known._sets) == 2 and texts[0] not in known._sets  # the oldest text let go
    assert known.names_in(texts[2]) is known.names_in(texts[2])  # remembered, not scanned again


def test_the_rule_is_part_of_the_cache_key():
    assert GenSettings().tag() != GenSettings(known_names=False).tag()


def test_the_likeliest_known_name_that_starts_like_the_word_replaces_an_unknown_one():
    known = KnownNames()
    other = [ContextChunk("click/_compat.py", "def term_len(x):\n    return len(strip_ansi(x))\n", True)]
    prefix = "    width = ter"
    # the model finishes the word into a name nobody spells: the one known name that starts with `ter` instead
    assert known.judge(prefix, "\n", "minal_size()", UNSURE, other) == ("m_len", ((5, 0.8),))
    # the model finishes it into the known name itself: its own text, with the floor
    text, conf = known.judge(prefix, "\n", "m_len(line)", ((5, 0.3), (11, 0.9)), other)
    assert text == "m_len(line)" and conf[0] == (5, KNOWN_NAME_P)
    # two known names start like it: the one spelled most often, at how often that guess is right
    two = other + [ContextChunk("a.py", "terminal = None\nterminal.x = terminal\n", True)]
    assert known.judge(prefix, "\n", "mcap()", UNSURE, two) == ("minal", ((5, LIKELIEST_NAME_P),))
    # ...where a use in the window counts thrice
    assert known.judge("term_len(s)\n" + prefix, "\n", "mcap()", UNSURE, two) == ("m_len", ((5, LIKELIEST_NAME_P),))
    # fewer than 3 characters typed, or the model ends the word (its next character is not part of a name)
    assert known.judge("    width = te", "\n", "rminal_size()", UNSURE, other) == ("rminal_size()", UNSURE)
    assert known.judge(prefix, "\n", "(x)", UNSURE, other) == ("(x)", UNSURE)
    # the window's own names count, the unfinished word itself does not
    assert known.likeliest_completion("n = tertiary_key\n" + prefix, "\n", []) == ("tiary_key", 0.8)
    assert known.likeliest_completion(prefix, "\n", []) is None
