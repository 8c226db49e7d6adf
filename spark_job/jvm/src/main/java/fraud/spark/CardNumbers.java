package fraud.spark;

import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.Charset;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.text.Normalizer;
import java.util.Arrays;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.api.java.UDF2;

/**
 * common/card_numbers.py (the specification) in Java: text normalised the same way (JSON escapes, NFKC,
 * digits of any script, NULs and format characters), the candidate pattern from Python, the Luhn check and
 * the hash exception, the same masks. The validation asks {@link #holds}; the dead letters call this
 * class as the UDF {@code fraud_masked_copy(value, limit)}: Python's {@code masked_copy}.
 * tests/integration/test_dlq.py holds the two to agreement. Known difference: characters newer than
 * Java's Unicode version.
 */
public final class CardNumbers implements UDF2<byte[], Integer, byte[]>, Serializable {
    private static final long serialVersionUID = 1L;
    private static final Pattern JSON_ESCAPE = Pattern.compile("\\\\(?:u([0-9a-fA-F]{4})|([\"\\\\/bfnrt]))");

    private final String candidatePattern;
    private final int minDigits;
    private final int maxDigits;
    private final int keepFirst;
    private final int keepLast;
    private final int hashChars;
    private transient Pattern candidate;

    public CardNumbers(String candidatePattern, int minDigits, int maxDigits, int keepFirst, int keepLast,
                       int hashChars) {
        this.candidatePattern = candidatePattern;
        this.minDigits = minDigits;
        this.maxDigits = maxDigits;
        this.keepFirst = keepFirst;
        this.keepLast = keepLast;
        this.hashChars = hashChars;
        candidate = Pattern.compile(candidatePattern);
    }

    private void readObject(java.io.ObjectInputStream in) throws IOException, ClassNotFoundException {
        in.defaultReadObject();
        candidate = Pattern.compile(candidatePattern);
    }

    @Override
    public byte[] call(byte[] data, Integer limit) {
        return data == null ? null : maskedCopy(data, limit);
    }

    /** Python's masked_copy. */
    public byte[] maskedCopy(byte[] data, int limit) {
        String text = textOf(data);
        String masked = mask(text);                 // text itself when it holds none
        if (masked == text && (data.length <= limit || !holds(textOf(Arrays.copyOf(data, limit))))) {
            return null;
        }
        String copy = cut(masked, limit);
        for (String again = mask(copy); again != copy; again = mask(copy)) {
            copy = cut(again, limit);
        }
        return copy.getBytes(StandardCharsets.UTF_8);
    }

    /** Python's text_of: UTF-16 after its byte-order mark or when a NUL is every other byte, else UTF-8. */
    public static String textOf(byte[] data) {
        if (data.length >= 2 && (data[0] & 0xff) == 0xff && (data[1] & 0xff) == 0xfe) {
            return decode(Arrays.copyOfRange(data, 2, data.length), StandardCharsets.UTF_16LE);
        }
        if (data.length >= 2 && (data[0] & 0xff) == 0xfe && (data[1] & 0xff) == 0xff) {
            return decode(Arrays.copyOfRange(data, 2, data.length), StandardCharsets.UTF_16BE);
        }
        int nuls = 0;
        int oddNuls = 0;
        for (int i = 0; i < data.length; i++) {
            if (data[i] == 0) {
                nuls++;
                oddNuls += i % 2;
            }
        }
        if (data.length >= 2 && nuls * 4 >= data.length) {
            return decode(data, oddNuls >= nuls - oddNuls ? StandardCharsets.UTF_16LE : StandardCharsets.UTF_16BE);
        }
        return decode(data, StandardCharsets.UTF_8);
    }

    private static String decode(byte[] data, Charset charset) {
        try {
            return charset.newDecoder().onMalformedInput(CodingErrorAction.REPLACE)
                    .onUnmappableCharacter(CodingErrorAction.REPLACE).decode(ByteBuffer.wrap(data)).toString();
        } catch (CharacterCodingException impossible) {
            throw new IllegalStateException(impossible);
        }
    }

    /** Python's normalise. */
    public String normalise(String text) {
        if (plain(text)) {
            return text;
        }
        if (text.indexOf('\\') >= 0) {
            text = unescape(text);
        }
        String nfkc = Normalizer.normalize(text, Normalizer.Form.NFKC);
        StringBuilder out = new StringBuilder(nfkc.length());
        nfkc.codePoints().forEach(cp -> {
            int type = Character.getType(cp);
            if (cp == 0 || type == Character.FORMAT) {
                return;
            }
            int digit = type == Character.DECIMAL_DIGIT_NUMBER ? Character.digit(cp, 10) : -1;
            if (digit >= 0) {
                out.append((char) ('0' + digit));
            } else {
                out.appendCodePoint(cp);
            }
        });
        return out.toString();
    }

    private static boolean plain(String text) {
        for (int i = 0; i < text.length(); i++) {
            char ch = text.charAt(i);
            if (ch > 0x7f || ch == '\\' || ch == 0) {
                return false;
            }
        }
        return true;
    }

    /** JSON's escapes decoded; a surrogate left without its other half becomes U+FFFD, as in Python. */
    private static String unescape(String text) {
        Matcher escape = JSON_ESCAPE.matcher(text);
        StringBuilder out = new StringBuilder(text.length());
        int at = 0;
        while (escape.find()) {
            out.append(text, at, escape.start());
            if (escape.group(1) != null) {
                out.append((char) Integer.parseInt(escape.group(1), 16));
            } else {
                char letter = escape.group(2).charAt(0);
                out.append(switch (letter) {
                    case 'b' -> '\b';
                    case 'f' -> '\f';
                    case 'n' -> '\n';
                    case 'r' -> '\r';
                    case 't' -> '\t';
                    default -> letter;
                });
            }
            at = escape.end();
        }
        out.append(text, at, text.length());
        for (int i = 0; i < out.length(); i++) {
            char ch = out.charAt(i);
            boolean paired = Character.isHighSurrogate(ch) && i + 1 < out.length()
                    && Character.isLowSurrogate(out.charAt(i + 1));
            if (paired) {
                i++;
            } else if (Character.isSurrogate(ch)) {
                out.setCharAt(i, '\uFFFD');
            }
        }
        return out.toString();
    }

    /** Python's holds_card_number. */
    public boolean holds(String text) {
        String normal = normalise(text);
        if (fewerDigits(normal)) {
            return false;
        }
        Matcher found = candidate.matcher(normal);
        while (found.find()) {
            if (isCard(normal, found)) {
                return true;
            }
        }
        return false;
    }

    /** Python's mask_card_numbers: the text unchanged without a card number, else its normal form masked. */
    public String mask(String text) {
        String normal = normalise(text);
        if (fewerDigits(normal)) {
            return text;
        }
        Matcher found = candidate.matcher(normal);
        StringBuilder out = null;
        int at = 0;
        while (found.find()) {
            if (isCard(normal, found)) {
                out = out == null ? new StringBuilder(normal.length()) : out;
                String digits = digitsOf(found.group());
                out.append(normal, at, found.start()).append(digits, 0, keepFirst)
                        .append("*".repeat(digits.length() - keepFirst - keepLast))
                        .append(digits, digits.length() - keepLast, digits.length());
                at = found.end();
            }
        }
        return out == null ? text : out.append(normal, at, normal.length()).toString();
    }

    /** Fewer digits than a card number has: counting them is a fraction of the pattern's scan. */
    private boolean fewerDigits(String normal) {
        int digits = 0;
        for (int i = 0; i < normal.length(); i++) {
            char ch = normal.charAt(i);
            if (ch >= '0' && ch <= '9' && ++digits >= minDigits) {
                return false;
            }
        }
        return true;
    }

    private boolean isCard(String normal, Matcher found) {
        String digits = digitsOf(found.group());
        return digits.length() >= minDigits && digits.length() <= maxDigits && luhnValid(digits)
                && !inHash(normal, found.start(), found.end());
    }

    private static String digitsOf(String candidate) {
        StringBuilder digits = new StringBuilder(candidate.length());
        for (int i = 0; i < candidate.length(); i++) {
            char ch = candidate.charAt(i);
            if (ch >= '0' && ch <= '9') {
                digits.append(ch);
            }
        }
        return digits.toString();
    }

    /** Python's in_hash: inside a token of hashChars or more lowercase hex characters, a letter among them. */
    private boolean inHash(String text, int start, int end) {
        while (start > 0 && tokenChar(text.charAt(start - 1))) {
            start--;
        }
        while (end < text.length() && tokenChar(text.charAt(end))) {
            end++;
        }
        if (end - start < hashChars) {
            return false;
        }
        boolean letter = false;
        for (int i = start; i < end; i++) {
            char ch = text.charAt(i);
            if (ch >= 'a' && ch <= 'f') {
                letter = true;
            } else if (ch < '0' || ch > '9') {
                return false;
            }
        }
        return letter;
    }

    private static boolean tokenChar(char ch) {
        return ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z';
    }

    private static String cut(String text, int limit) {
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        if (bytes.length <= limit) {
            return text;
        }
        try {
            CharBuffer chars = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.IGNORE)
                    .decode(ByteBuffer.wrap(bytes, 0, limit));
            return chars.toString();
        } catch (CharacterCodingException impossible) {
            throw new IllegalStateException(impossible);
        }
    }

    static boolean luhnValid(String digits) {
        int total = 0;
        for (int i = 0; i < digits.length(); i++) {
            int d = digits.charAt(digits.length() - 1 - i) - '0';
            if (i % 2 == 1) {
                d = d > 4 ? d * 2 - 9 : d * 2;
            }
            total += d;
        }
        return total % 10 == 0;
    }
}
