"""Excerpts of long texts: never over their cap, made of the text itself, and centred on what the question asks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from graphrecall.retrieve.excerpt import ELLIPSIS, Turn, excerpt, question_terms, split_turns

FILLER = "The weather was mild and the conversation went on about nothing in particular. "


def _core(out: str) -> str:
    """The excerpt without the ellipses it added at either end."""
    out = out.removeprefix(ELLIPSIS + " ")
    for suffix in (" " + ELLIPSIS, ELLIPSIS):
        if out.endswith(suffix):
            return out[: -len(suffix)]
    return out


@given(
    text=st.text(min_size=0, max_size=800),
    words=st.lists(st.sampled_from(["train", "taxi", "hotel", "price", "cat"]), max_size=3),
    cap=st.integers(min_value=1, max_value=900),
)
def test_an_excerpt_fits_its_cap_and_comes_from_the_text(text: str, words: list[str], cap: int) -> None:
    out = excerpt(text, question_terms(" ".join(words)), cap)
    assert len(out) <= cap
    if len(text) <= cap:
        assert out == text
    else:
        assert _core(out).strip() in text


def test_the_sentence_that_shares_the_questions_words_is_kept() -> None:
    text = FILLER * 10 + "The Narita Express to Tokyo Station costs 3,000 yen. " + FILLER * 10
    out = excerpt(text, question_terms("How much does the Narita Express cost?"), 300)
    assert "The Narita Express to Tokyo Station costs 3,000 yen." in out
    assert out.startswith(ELLIPSIS) and out.endswith(ELLIPSIS)


def test_without_a_match_the_opening_is_kept() -> None:
    text = "First things first. " + FILLER * 20
    out = excerpt(text, question_terms("zebra"), 200)
    assert out.startswith("First things first.") and out.endswith(ELLIPSIS)


def test_one_overlong_sentence_is_cut_around_its_first_matching_word() -> None:
    text = "word " * 400 + "the zebra crossed " + "word " * 400
    out = excerpt(text, question_terms("zebra"), 120)
    assert "zebra" in out and len(out) <= 120


def test_a_rounds_text_splits_back_into_its_messages() -> None:
    text = "user: I moved.\nIt was hard.\nassistant: Congratulations!\nuser: thanks"
    assert split_turns(text) == [
        Turn("user", "I moved.\nIt was hard."),
        Turn("assistant", "Congratulations!"),
        Turn("user", "thanks"),
    ]
    assert split_turns("no roles here") == []
    assert split_turns("preamble\nassistant: hi") == [Turn("user", "preamble"), Turn("assistant", "hi")]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant"]),
            st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=60),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_split_turns_inverts_the_round_format(messages: list[tuple[str, str]]) -> None:
    text = "\n".join(f"{role}: {said}" for role, said in messages)
    assert split_turns(text) == [Turn(role, said) for role, said in messages]
