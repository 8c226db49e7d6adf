"""What a card number (PAN) looks like in text, however it is written, and how it is masked: one
definition for the contract's validator, the dead letters' masker and the leak scanner
(``common/pan_scan.py``). The detector job runs its Java twin (``fraud.spark.CardNumbers``), given this
file's pattern and bounds (``spark_job/parsing.py``) and held to it by ``tests/integration/test_dlq.py``.

Text is read **normalised** (``normalise``): JSON's escapes decoded (``\\u0034`` is a 4), Unicode NFKC
(full-width digits become ASCII ones, a no-break space a space), a decimal digit of any script read as its
ASCII digit, NULs and format characters (zero-width spaces, byte-order marks) dropped. Bytes are read as
the text they hold (``text_of``: UTF-16 when they say so, else UTF-8). In normalised text a candidate is
13 to 19 ASCII digits written

- bare: a run of them with no digit right before or after it (letters may touch it: ``card4111…``), not
  after ``<digit>.`` (the fraction of a decimal number, a score with 16 decimals);
- or in the groups cards are printed in, 4-4-4, 4-4-4-4 plus an optional last group of 1-4 digits, or
  4-6-4/5 (American Express, Diners), each joined to the next by one or two characters that are neither
  letters nor digits (``4111 1111…``, ``4111.1111…``, ``4111_1111…``, two spaces), not glued by one
  such character to further digits (a date or a dashed id such as ``txn-7-00001-000042`` is not a card
  number).

A candidate is a card number when its digits pass the Luhn check and it does not lie inside a hash: a
token of ``HASH_CHARS`` or more lowercase hexadecimal characters (SHA-256 sums, alert and case ids), of
which about one in two hundred holds a Luhn-valid run of 13 or more decimal digits by chance. Masking
keeps the number of digits and at most the first six and last four: ``411111******1111``.
"""

from __future__ import annotations

import re
import unicodedata

# Each alternative matches a first digit before its look-behinds (which then look one character
# further back): a scan tries the pattern at every position of the text, and most positions fail on
# that digit at once. The same candidates as with the look-behinds first, found several times faster
# in text with few digits (tests/unit/test_card_numbers.py; docs/performance.md, "A flood of broken records").
_SEP = "[^0-9A-Za-z]{1,2}"
_BARE = r"[0-9](?<![0-9][0-9])(?<![0-9]\.[0-9])[0-9]{12,18}(?![0-9])"
_GROUPED = (rf"[0-9](?<![0-9][0-9])(?<![0-9][^0-9A-Za-z][0-9])"
            rf"(?:[0-9]{{3}}(?:{_SEP}[0-9]{{4}}){{2}}(?:{_SEP}[0-9]{{4}})?(?:{_SEP}[0-9]{{1,4}})?"
            rf"|[0-9]{{3}}{_SEP}[0-9]{{6}}{_SEP}[0-9]{{4,5}})"
            rf"(?![0-9])(?![^0-9A-Za-z][0-9])")
CANDIDATE_PATTERN = f"{_BARE}|{_GROUPED}"
CANDIDATE_RE = re.compile(CANDIDATE_PATTERN)
_NOT_DIGITS = re.compile("[^0-9]")
MIN_DIGITS, MAX_DIGITS = 13, 19
KEEP_FIRST, KEEP_LAST = 6, 4
HASH_CHARS = 32                      # a hexdigest's cut this long or longer is a hash (alert_id: 32)

# JSON's escapes: \uXXXX (a pair of them for a character beyond the BMP) and the one-letter ones.
_JSON_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_ONE_LETTER = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SURROGATES = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_TOKEN_CHAR = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_HEX = frozenset("0123456789abcdef")


def _unescape(match: re.Match) -> str:
    return chr(int(match.group(1), 16)) if match.group(1) else _ONE_LETTER[match.group(2)]


class _Reading(dict):
    """``str.translate``'s table of how a character of NFKC text is read, filled as characters are met: a
    decimal digit of any script as its ASCII digit, NUL and format characters dropped, the rest as is."""

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        digit = unicodedata.decimal(ch, None)
        self[code] = value = ("" if code == 0 or unicodedata.category(ch) == "Cf"
                              else ch if digit is None else str(digit))
        return value


_READING = _Reading()


def normalise(text: str) -> str:
    """``text`` as a card number is looked for in it (the module's docstring)."""
    if text.isascii() and "\\" not in text and "\0" not in text:
        return text                                    # nothing to decode: the common case, kept cheap
    if "\\" in text:
        text = _JSON_ESCAPE.sub(_unescape, text)
        text = _SURROGATES.sub(lambda m: m.group().encode("utf-16", "surrogatepass").decode("utf-16"), text)
        text = _LONE_SURROGATE.sub("\ufffd", text)
    return unicodedata.normalize("NFKC", text).translate(_READING)


def text_of(data: bytes) -> str:
    """Bytes as the text they hold: UTF-16 after its byte-order mark, or when a NUL is every other byte
    (ASCII written as UTF-16); else UTF-8. Bytes that do not decode become U+FFFD."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", "replace")
    if len(data) >= 2 and data.count(0) * 4 >= len(data):
        little = data[1::2].count(0) >= data[0::2].count(0)
        return data.decode("utf-16-le" if little else "utf-16-be", "replace")
    return data.decode("utf-8", "replace")


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
    return _NOT_DIGITS.sub("", candidate)


def is_card_digits(digits: str) -> bool:
    return MIN_DIGITS <= len(digits) <= MAX_DIGITS and luhn_valid(digits)


def in_hash(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` lies inside a token of ``HASH_CHARS`` or more lowercase hex characters
    with a letter among them."""
    while start > 0 and text[start - 1] in _TOKEN_CHAR:
        start -= 1
    while end < len(text) and text[end] in _TOKEN_CHAR:
        end += 1
    token = text[start:end]
    return len(token) >= HASH_CHARS and _HEX.issuperset(token) and not token.isdigit()


def matches_in(normal: str) -> list[re.Match]:
    """The card numbers in text already normalised, as matches (their place in it)."""
    return [m for m in CANDIDATE_RE.finditer(normal)
            if is_card_digits(digits_of(m.group())) and not in_hash(normal, m.start(), m.end())]


def card_numbers_in(text: str) -> list[str]:
    """The card numbers in ``text``, as written in its normalised form (with their separators)."""
    return [m.group() for m in matches_in(normalise(text))]


def holds_card_number(text: str) -> bool:
    return bool(card_numbers_in(text))


def mask(candidate: str) -> str:
    digits = digits_of(candidate)
    return digits[:KEEP_FIRST] + "*" * (len(digits) - KEEP_FIRST - KEEP_LAST) + digits[-KEEP_LAST:]


def mask_card_numbers(text: str) -> str:
    """``text`` unchanged when it holds no card number; else its normalised form with each masked."""
    normal = normalise(text)
    matches = matches_in(normal)
    if not matches:
        return text
    pieces, at = [], 0
    for m in matches:
        pieces += [normal[at:m.start()], mask(m.group())]
        at = m.end()
    return "".join(pieces) + normal[at:]


def masked_copy(data: bytes, limit: int) -> bytes | None:
    """A dead letter's copy of ``data`` when it cannot be its first ``limit`` bytes: its text with every
    card number masked, cut to at most ``limit`` bytes at a character's end, and masked again while the
    cut leaves one (a cut can turn a longer run of digit groups into a card number's shape). None when
    neither the whole nor its first ``limit`` bytes hold a card number."""
    text = text_of(data)
    masked = mask_card_numbers(text)               # ``text`` itself when it holds none
    if masked is text and (len(data) <= limit or not holds_card_number(text_of(data[:limit]))):
        return None
    copy = _cut(masked, limit)
    while (again := mask_card_numbers(copy)) is not copy:
        copy = _cut(again, limit)
    return copy.encode()


def _cut(text: str, limit: int) -> str:
    return text.encode()[:limit].decode("utf-8", "ignore")


def safe_excerpt(raw: object, limit: int = 200) -> str:
    """The start of a rejected record for a log line: its text with card numbers masked, then cut."""
    text = text_of(raw) if isinstance(raw, (bytes, bytearray)) else str(raw)
    return repr(mask_card_numbers(text))[:limit]
