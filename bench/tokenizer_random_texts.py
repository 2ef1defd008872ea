#!/usr/bin/env python3
"""Writes tests/data/tokenizer_pre/texts_random.txt: 200 short random texts built from pieces that the
pre-tokenizer regexes treat differently (spaces of every kind, line breaks, digits of several scripts,
contractions, ASCII and CJK punctuation, symbols, cased and uncased letters, marks, emoji), for the
differential test against llama.cpp (bench/tokenizer_peer.mjs). Deterministic (seeded).

Usage: python3 bench/tokenizer_random_texts.py > tests/data/tokenizer_pre/texts_random.txt
"""
import random
import sys

PIECES = list("aZ zA bQ") + [
    " ", " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u0085", "\u000b", "\u000c",
    "0", "7", "42", "123", "\u0663", "\uff11", "\u00b2", "\u00bd",
    "'", "'s", "'S", "'ll", "'RE", "\u2019", "\"", ",", ".", "...", "!", "?", "-", "_", "/", "//", "\\", "(", ")",
    "[", "]", "{", "}", "$", "+", "<", "=", ">", "^", "~", "|", "`", "#", "%", "&", "*", "@", ";", ":",
    "\u00e9", "\u00c9", "\u00df", "\u01c5", "\u03a9", "\u03c9", "\u0416", "\u0436", "\u212a", "\u1f7d", "\u0301",
    "\u0928\u094d", "\u4e2d", "\u6587", "\u3001", "\u3002", "\uff01", "\uff0c", "\u201c", "\u201d", "\u2018", "\u2014",
    "\u2026", "\ud55c", "\u30ab", "\u3042", "\U0001f999", "\U0001f44b\U0001f3fd", "\u200d", "\ufe0f", "\u20ac",
    "\u2192", "\u00ab", "the", "THE", "The", "tHE", "don't", "IT'S", "x1", "ab12cd", "fooBar", "FOObar", "http://",
    ".com", "\u0645\u0631", "\u05e9"]
SEP = "\n__ggml_vocab_test__\n"


def main():
    rng = random.Random(18)
    out = []
    for _ in range(200):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 14)))
        assert SEP not in text
        out.append(text + SEP)
    sys.stdout.buffer.write("".join(out).encode("utf-8"))


if __name__ == "__main__":
    main()
