"""attnlab.tokenizer: byte-pair encoding learns merges, round-trips any text,
and refuses bad input by name."""

import pytest
from attnlab.tokenizer import N_BYTES, BPETokenizer, chunks, merge, train_bpe
from hypothesis import given
from hypothesis import strategies as st

TEXT = "the cat eats the cheese . the dog eats the bread . " * 20


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe(TEXT, 300)


@given(text=st.text(max_size=60))
def test_decode_of_encode_is_the_text(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text)) == text


@given(text=st.text(min_size=1, max_size=40), extra=st.integers(0, 30))
def test_round_trip_for_a_tokenizer_trained_on_any_text(text, extra):
    tok = train_bpe(text, N_BYTES + extra)
    assert tok.size <= N_BYTES + extra
    assert tok.decode(tok.encode(text)) == text


def test_untrained_tokenizer_is_utf8_bytes():
    tok = BPETokenizer(())
    assert tok.size == 256
    assert tok.encode("注意力") == list("注意力".encode()) == [
        230, 179, 168, 230, 132, 143, 229, 138, 155]


def test_merges_are_the_most_frequent_pairs(tokenizer):
    # "e" "a" / " " "t" ... the first merge is the most frequent pair in TEXT
    first = tokenizer.merges[0]
    assert tokenizer.piece(N_BYTES) == bytes(first)
    assert tokenizer.piece(N_BYTES) in (b" t", b"th", b"he")


def test_frequent_words_become_one_token(tokenizer):
    assert len(tokenizer.encode(" the")) == 1
    assert len(tokenizer.encode(" cheese")) == 1
    # an unseen word is split into known pieces, never lost
    ids = tokenizer.encode(" purple")
    assert len(ids) > 1
    assert tokenizer.decode(ids) == " purple"


def test_merges_never_cross_chunks(tokenizer):
    for i in range(N_BYTES, tokenizer.size):
        piece = tokenizer.piece(i).decode("utf-8", errors="replace")
        assert len(chunks(piece)) <= 1


def test_training_stops_when_no_pair_repeats():
    assert train_bpe("abc", 1000).merges == ()
    assert train_bpe("abab", 1000).size == N_BYTES + 1


def test_merge_replaces_left_to_right():
    assert merge([1, 2, 1, 2, 3], (1, 2), 9) == [9, 9, 3]
    assert merge([1, 1, 1], (1, 1), 7) == [7, 1]


def test_chunks_keep_the_space_before_a_word():
    assert chunks("The cat.") == ["The", " cat", "."]
    assert "".join(chunks("a  b\n注意力。x")) == "a  b\n注意力。x"


@pytest.mark.parametrize(
    ("call", "error", "argument"),
    [
        (lambda: train_bpe("", 300), TypeError, "text"),
        (lambda: train_bpe(b"abc", 300), TypeError, "text"),
        (lambda: train_bpe("abc", 100), ValueError, "vocab_size"),
        (lambda: train_bpe("abc", 300.0), ValueError, "vocab_size"),
        (lambda: train_bpe("a\ud800b", 300), ValueError, "text"),
        (lambda: BPETokenizer(()).encode(3), TypeError, "text"),
        (lambda: BPETokenizer(()).decode([256]), ValueError, "ids"),
        (lambda: BPETokenizer(()).decode([-1]), ValueError, "ids"),
        (lambda: BPETokenizer(()).decode([1.0]), TypeError, "ids"),
        (lambda: BPETokenizer(()).decode("ab"), TypeError, "ids"),
        (lambda: BPETokenizer(()).piece(300), ValueError, "ids"),
    ],
)
def test_bad_input_names_the_argument(call, error, argument):
    with pytest.raises(error, match=argument):
        call()
