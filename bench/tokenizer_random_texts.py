#!/usr/bin/env python3
"""Random texts for the differential test of the pre-tokenizers against llama.cpp (bench/tokenizer_peer.mjs),
built from pieces that the regexes treat differently (spaces of every kind, line breaks, digits of several
scripts, contractions, ASCII and CJK punctuation, symbols, cased and uncased letters, marks, emoji).
Deterministic (seeded).

By default: the 200 short texts stored in tests/data/tokenizer_pre/texts_random.txt.
    python3 bench/tokenizer_random_texts.py > tests/data/tokenizer_pre/texts_random.txt
--count N --seed S --wide: N texts of up to 24 pieces, with more pieces from scripts that write with
combining marks (Devanagari, Bengali, Tamil, Thai, Arabic and Hebrew vowel signs, decomposed Latin), emoji
sequences (ZWJ, skin tones, keycaps, flags), more digits, whitespace runs and letter cases, for checks on
thousands of texts that are not stored (docs/models.md, "Tokenizers against llama.cpp").
"""
import argparse
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

# --wide adds these.
WIDE_PIECES = [
    # combining marks alone, stacked, after letters, punctuation, digits and spaces; an enclosing mark
    "\u0300", "\u0301\u0302", "e\u0301", "A\u0308", "!\u0301", ".\u0301", " \u0301", "1\u0301", "\u0301\n",
    "\u20dd", "Tie\u0302\u0301ng Vie\u0323\u0302t", "Ti\u1ebfng", "na\u00efve",
    # scripts written with marks (spacing and non-spacing)
    "\u0939\u093f\u0928\u094d\u0926\u0940", "\u0915\u094d\u0937", "\u0902", "\u09ac\u09be\u0982\u09b2\u09be",
    "\u0ba4\u0bae\u0bbf\u0bb4\u0bcd", "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22", "\u0e31",
    "\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627", "\u05e9\u05c1\u05b8\u05dc\u05d5\u05b9\u05dd",
    "\u1100\u1161\u11a8",
    # emoji sequences: ZWJ, variation selector, keycap (digit, U+FE0F, enclosing U+20E3), flag
    "\U0001f469\u200d\U0001f4bb", "\u2764\ufe0f", "1\ufe0f\u20e3", "\U0001f1ef\U0001f1f5", "\U0001f680",
    # digits of other scripts, letter-like numbers, long digit runs
    "\u0663\u0664", "\u0967\u0968\u0969", "\u2460", "\u216b", "1234567", "3.14", "1,000",
    # CJK, kana (half-width too)
    "\u6f22\u5b57\u304b\u306a\u30ab\u30ca", "\uff76\uff80\uff76\uff85", "\u6211\u60f3\u5728apple\u5de5\u4f5c",
    # whitespace runs
    "   ", "\t\t", " \n ", "\u2003", "\u3000\u3000", "\n\n\n", " \r\n",
    # contractions and cases
    "'Ve", "'D", "\u2019s", "McDonald", "iPhone", "\u0391\u0392\u0393\u03b1\u03b2\u03b3", "\u01c5ungla",
]
SEP = "\n__ggml_vocab_test__\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--wide", action="store_true")
    args = ap.parse_args()
    pieces = PIECES + WIDE_PIECES if args.wide else PIECES
    max_pieces = 24 if args.wide else 14
    rng = random.Random(args.seed)
    out = []
    for _ in range(args.count):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, max_pieces)))
        assert SEP not in text
        out.append(text + SEP)
    sys.stdout.buffer.write("".join(out).encode("utf-8"))


if __name__ == "__main__":
    main()
