"""What a card number (PAN) looks like in text, and how it is masked: one definition for the contract,
the leak scanner (``common/pan_scan.py``) and the dead letters (``spark_job/dead_letters.py`` runs the
same pattern natively in Spark; Java and Python read it alike).

A candidate is 13 to 19 digits written

- bare (16 digits in a row), standing alone: no digit or letter right before or after it, not after
  ``<digit>.`` (the fraction of a decimal number, a score with 16 decimals);
- or in the groups cards are printed in, joined by single spaces or dashes: 4-4-4, 4-4-4-4 plus an
  optional last group of 1-4 digits (``dddd dddd dddd dddd``, ``dddd-dddd-dddd-dddd``) or 4-6-4/5
  (American Express, Diners), standing alone and not glued to further digit groups (a date or a
  dashed id such as ``txn-7-00001-000042`` is not a card number).

A candidate is a card number when its digits pass the Luhn check. Masking keeps the number of digits
and at most the first six and last four: ``411111******1111`` (separators dropped).
"""

from __future__ import annotations

import re

# Each alternative matches a first digit before its look-behinds (which then look one character
# further back): a scan tries the pattern at every position of the text, and most positions fail on
# that digit at once. The same candidates as with the look-behinds first, found several times faster
# in text with few digits (tests/unit/test_card_numbers.py; docs/performance.md, "A flood of broken records").
_BARE = r"[0-9](?<![0-9A-Za-z][0-9])(?<![0-9]\.[0-9])[0-9]{12,18}(?![0-9A-Za-z])"
_GROUPED = (r"[0-9](?<![0-9A-Za-z][0-9])(?<![0-9][ -][0-9])"
            r"(?:[0-9]{3}(?:[ -][0-9]{4}){2}(?:[ -][0-9]{4})?(?:[ -][0-9]{1,4})?|[0-9]{3}[ -][0-9]{6}[ -][0-9]{4,5})"
            r"(?![0-9A-Za-z])(?![ -][0-9])")
CANDIDATE_PATTERN = f"{_BARE}|{_GROUPED}"
CANDIDATE_RE = re.compile(CANDIDATE_PATTERN)
SEPARATORS_PATTERN = "[ -]"
MIN_DIGITS, MAX_DIGITS = 13, 19
KEEP_FIRST, KEEP_LAST = 6, 4


def luhn_valid(digits: str) -> bool:
    """The Luhn check of a string of ASCII digits (False for anything else, never an exception)."""
    if not digits or not digits.isascii() or not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def digits_of(candidate: str) -> str:
    return re.sub(SEPARATORS_PATTERN, "", candidate)


def is_card_digits(digits: str) -> bool:
    return MIN_DIGITS <= len(digits) <= MAX_DIGITS and luhn_valid(digits)


def card_numbers_in(text: str) -> list[str]:
    """The card numbers in ``text``, as written (with their separators)."""
    return [m.group() for m in CANDIDATE_RE.finditer(text) if is_card_digits(digits_of(m.group()))]


def holds_card_number(text: str) -> bool:
    return bool(card_numbers_in(text))


def mask(candidate: str) -> str:
    digits = digits_of(candidate)
    return digits[:KEEP_FIRST] + "*" * (len(digits) - KEEP_FIRST - KEEP_LAST) + digits[-KEEP_LAST:]


def mask_card_numbers(text: str) -> str:
    """``text`` with every card number in it masked; everything else unchanged."""
    return CANDIDATE_RE.sub(lambda m: mask(m.group()) if is_card_digits(digits_of(m.group())) else m.group(), text)


def safe_excerpt(raw: object, limit: int = 200) -> str:
    """The start of a rejected record for a log line, card numbers masked (after the cut, which may
    leave a number's first digits standing alone)."""
    return mask_card_numbers(repr(raw)[:limit])
