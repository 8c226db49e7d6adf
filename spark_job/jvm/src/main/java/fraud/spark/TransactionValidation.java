package fraud.spark;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.sql.Timestamp;
import java.time.DateTimeException;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF4;

/**
 * The transaction contract (common/contracts.py, decode_transaction: the specification) as one Spark
 * UDF over a Kafka record's value, key and timestamp: the same rules in the same order, the same reason
 * up to its first colon. One opaque expression instead of a tree of Catalyst expressions, because Spark
 * plans every micro-batch again and the rules query's plan held the tree once per branch
 * (docs/performance.md). tests/integration/test_dlq.py holds the two to agreement.
 *
 * <p>Returns (reason, then the contract's required fields in order with amount as a double and
 * event_time as a timestamp, then lat, lon); reason is null for a valid record and the rest null for an
 * invalid one. The contract's values come from Python through the constructor (spark_job/parsing.py).
 */
public final class TransactionValidation implements UDF4<byte[], byte[], Timestamp, Long, Row> {
    private static final long serialVersionUID = 1L;
    private static final MathContext PYTHON_DECIMAL_CONTEXT = new MathContext(28, RoundingMode.HALF_EVEN);
    private static final int PYTHON_INT_MAX_DIGITS = 4300;      // Python's int() refuses longer numbers
    private static final Object MISSING = new Object();
    private static final Object NESTED_OBJECT = new Object();
    private static final Object NESTED_ARRAY = new Object();

    private final List<String> idFields;
    private final List<String> requiredFields;
    private final List<String> channels;
    private final int maxValueBytes;
    private final int maxIdLength;
    private final BigDecimal maxAmount;
    private final long minEventTimeMillis;
    private final CardNumbers cardNumbers;
    private final String[] patterns;
    private transient Pattern eventTime;
    private transient Pattern currency;
    private transient Pattern mcc;
    private transient Pattern loneSurrogate;
    private transient JsonFactory json;

    public TransactionValidation(String idFields, String requiredFields, String channels, int maxValueBytes,
                                 int maxIdLength, long maxAmount, long minEventTimeMillis,
                                 String eventTimePattern, String currencyPattern,
                                 String mccPattern, String loneSurrogatePattern, CardNumbers cardNumbers) {
        this.idFields = List.of(idFields.split(","));
        this.requiredFields = List.of(requiredFields.split(","));
        this.channels = List.of(channels.split(","));
        this.maxValueBytes = maxValueBytes;
        this.maxIdLength = maxIdLength;
        this.maxAmount = BigDecimal.valueOf(maxAmount);
        this.minEventTimeMillis = minEventTimeMillis;
        this.cardNumbers = cardNumbers;
        this.patterns = new String[] {eventTimePattern, currencyPattern, mccPattern, loneSurrogatePattern};
        compile();
    }

    private void compile() {
        eventTime = Pattern.compile(patterns[0]);
        currency = Pattern.compile(patterns[1]);
        mcc = Pattern.compile(patterns[2]);
        loneSurrogate = Pattern.compile(patterns[3]);
        // Python's json rejects duplicate keys (the contract's hook), NaN and Infinity, and ints of more
        // than 4,300 digits (checked per token below); its floats have no length limit.
        json = JsonFactory.builder()
                .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
                .streamReadConstraints(StreamReadConstraints.builder().maxNumberLength(Integer.MAX_VALUE).build())
                .build();
    }

    private void readObject(java.io.ObjectInputStream in) throws IOException, ClassNotFoundException {
        in.defaultReadObject();
        compile();
    }

    /** A rule the record breaks; its message is the dead letter's reason. */
    private static final class Invalid extends Exception {
        private static final long serialVersionUID = 1L;

        Invalid(String reason) {
            super(reason, null, false, false);
        }
    }

    @Override
    public Row call(byte[] value, byte[] key, Timestamp recordTime, Long maxAheadMillis) {
        Object[] row = new Object[requiredFields.size() + 3];
        try {
            check(value, key, recordTime, maxAheadMillis, row);
        } catch (Invalid invalid) {
            Object[] failed = new Object[row.length];
            failed[0] = invalid.getMessage();
            return RowFactory.create(failed);
        }
        return RowFactory.create(row);
    }

    private void check(byte[] value, byte[] key, Timestamp recordTime, Long maxAheadMillis, Object[] row)
            throws Invalid {
        if (value == null || value.length == 0) {
            throw new Invalid("empty value");
        }
        if (value.length > maxValueBytes) {
            throw new Invalid("value is oversized: " + value.length + " bytes > " + maxValueBytes);
        }
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(value)).toString();
        } catch (CharacterCodingException e) {
            throw new Invalid("value is not valid UTF-8");
        }
        Object root = parse(text);
        if (text.contains("\\u") && loneSurrogate.matcher(text).find()) {
            throw new Invalid("value is not valid JSON");
        }
        if (!(root instanceof Map)) {
            throw new Invalid("value is a JSON " + jsonType(root) + ", not an object");
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> txn = (Map<String, Object>) root;
        for (String name : requiredFields) {
            Object field = txn.getOrDefault(name, MISSING);
            if (field == MISSING) {
                throw new Invalid("missing required field " + name);
            }
            if (field == null) {
                throw new Invalid("required field " + name + " is null");
            }
        }
        for (String name : requiredFields) {
            if (!name.equals("amount") && !(txn.get(name) instanceof String)) {
                throw new Invalid(name + " must be a string, got " + jsonType(txn.get(name)));
            }
        }
        for (String name : idFields) {
            String id = (String) txn.get(name);
            if (onlySpaces(id)) {
                throw new Invalid(name + " is empty");
            }
            if (id.codePointCount(0, id.length()) > maxIdLength) {
                throw new Invalid(name + " is longer than " + maxIdLength + " characters");
            }
        }
        for (String name : idFields) {
            if (cardNumbers.holds((String) txn.get(name))) {
                throw new Invalid(name + " holds a card number (PAN); ids must be tokens");
            }
        }

        Object amount = txn.get("amount");
        if (!(amount instanceof BigDecimal)) {
            throw new Invalid("amount must be a number, got " + jsonType(amount));
        }
        BigDecimal exact = (BigDecimal) amount;
        if (exact.signum() < 0) {
            throw new Invalid("amount is negative");
        }
        if (exact.compareTo(maxAmount) > 0) {
            throw new Invalid("amount is absurdly large");
        }
        // Python's Decimal.normalize() rounds to its context's 28 digits before the places are counted.
        if (exact.round(PYTHON_DECIMAL_CONTEXT).stripTrailingZeros().scale() > 2) {
            throw new Invalid("amount has more than 2 decimals");
        }
        if (!currency.matcher((String) txn.get("currency")).matches()) {
            throw new Invalid("currency is not an ISO 4217 code");
        }
        if (!channels.contains((String) txn.get("channel"))) {
            throw new Invalid("channel must be one of " + String.join(", ", channels));
        }
        if (!mcc.matcher((String) txn.get("mcc")).matches()) {
            throw new Invalid("mcc is not a 4-digit merchant category code");
        }

        long moment = eventTimeMillis((String) txn.get("event_time"));
        if (moment < minEventTimeMillis) {
            throw new Invalid("event_time is absurdly far in the past");
        }
        if (recordTime != null && maxAheadMillis != null && moment > recordTime.getTime() + maxAheadMillis) {
            throw new Invalid("event_time is more than " + seconds(maxAheadMillis)
                              + " s ahead of the record's timestamp");
        }
        Double lat = coordinate(txn, "lat", 90);
        Double lon = coordinate(txn, "lon", 180);

        if (key == null) {
            throw new Invalid("record key is missing (it must be the card_id)");
        }
        if (!new String(key, StandardCharsets.UTF_8).equals(txn.get("card_id"))) {
            throw new Invalid("record key does not match card_id");
        }

        int i = 1;
        for (String name : requiredFields) {
            Object field = txn.get(name);
            if (name.equals("amount")) {
                field = Double.parseDouble(exact.toString());
            } else if (name.equals("event_time")) {
                field = new Timestamp(moment);
            }
            row[i++] = field;
        }
        row[i++] = lat;
        row[i] = lon;
    }

    /** The whole text as Python's json.loads reads it: the root's fields at depth one (nested values
     * as markers of their type), every token checked; anything else is not valid JSON. */
    private Object parse(String text) throws Invalid {
        if (text.startsWith("\uFEFF")) {                  // Python: "Unexpected UTF-8 BOM"
            throw new Invalid("value is not valid JSON");
        }
        try (JsonParser parser = json.createParser(text)) {
            JsonToken first = parser.nextToken();
            if (first == null) {
                throw new Invalid("value is not valid JSON");
            }
            Object root;
            if (first == JsonToken.START_OBJECT) {
                Map<String, Object> fields = new HashMap<>();
                for (JsonToken token = parser.nextToken(); token != JsonToken.END_OBJECT; token = parser.nextToken()) {
                    String name = parser.currentName();
                    fields.put(name, value(parser, parser.nextToken()));
                }
                root = fields;
            } else {
                root = value(parser, first);
            }
            if (parser.nextToken() != null) {            // trailing data after the value
                throw new Invalid("value is not valid JSON");
            }
            return root;
        } catch (JsonProcessingException e) {
            throw new Invalid("value is not valid JSON");
        } catch (IOException e) {
            throw new IllegalStateException("reading a string cannot fail", e);
        }
    }

    private static Object value(JsonParser parser, JsonToken token) throws IOException, Invalid {
        switch (token) {
            case VALUE_STRING:
                return parser.getText();
            case VALUE_NUMBER_INT:
                String digits = parser.getText();
                if (digits.length() - (digits.startsWith("-") ? 1 : 0) > PYTHON_INT_MAX_DIGITS) {
                    throw new Invalid("value is not valid JSON");
                }
                return new BigDecimal(digits);
            case VALUE_NUMBER_FLOAT:
                return decimal(parser.getText());
            case VALUE_TRUE:
            case VALUE_FALSE:
                return token == JsonToken.VALUE_TRUE;
            case VALUE_NULL:
                return null;
            case START_OBJECT:
            case START_ARRAY:
                JsonToken end = token == JsonToken.START_OBJECT ? JsonToken.END_OBJECT : JsonToken.END_ARRAY;
                for (JsonToken inner = parser.nextToken(); inner != end; inner = parser.nextToken()) {
                    if (inner == JsonToken.FIELD_NAME) {
                        inner = parser.nextToken();
                    }
                    value(parser, inner);
                }
                return token == JsonToken.START_OBJECT ? NESTED_OBJECT : NESTED_ARRAY;
            default:
                throw new Invalid("value is not valid JSON");
        }
    }

    /** A JSON number as Python's Decimal reads it; an exponent beyond Java's range as the nearest
     * value that keeps its sign and its side of 1. */
    private static BigDecimal decimal(String text) {
        try {
            return new BigDecimal(text);
        } catch (NumberFormatException e) {
            int exponent = Math.max(text.indexOf('e'), text.indexOf('E'));
            BigDecimal mantissa = new BigDecimal(text.substring(0, exponent));
            if (mantissa.signum() == 0) {
                return BigDecimal.ZERO;
            }
            BigDecimal magnitude = new BigDecimal(text.charAt(exponent + 1) == '-' ? "1E-999999" : "1E+999999");
            return mantissa.signum() < 0 ? magnitude.negate() : magnitude;
        }
    }

    /** Milliseconds as seconds without trailing zeros ("60", "0.5"): contracts.py's _seconds. */
    private static String seconds(long millis) {
        return BigDecimal.valueOf(millis).movePointLeft(3).stripTrailingZeros().toPlainString();
    }

    private static String jsonType(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Boolean) {
            return "boolean";
        }
        if (value instanceof BigDecimal) {
            return "number";
        }
        if (value instanceof String) {
            return "string";
        }
        return value == NESTED_ARRAY ? "array" : "object";
    }

    private long eventTimeMillis(String text) throws Invalid {
        if (!eventTime.matcher(text).matches()) {
            throw new Invalid("event_time is not ISO-8601 UTC with milliseconds");
        }
        int year = Integer.parseInt(text.substring(0, 4));
        try {
            if (year < 1) {                               // Python's datetime starts at year 1
                throw new DateTimeException("year 0");
            }
            return LocalDateTime.of(year, Integer.parseInt(text.substring(5, 7)), Integer.parseInt(text.substring(8, 10)),
                                    Integer.parseInt(text.substring(11, 13)), Integer.parseInt(text.substring(14, 16)),
                                    Integer.parseInt(text.substring(17, 19)),
                                    Integer.parseInt(text.substring(20, 23)) * 1_000_000)
                    .toInstant(ZoneOffset.UTC).toEpochMilli();
        } catch (DateTimeException e) {
            throw new Invalid("event_time is not a real date");
        }
    }

    private static Double coordinate(Map<String, Object> txn, String name, int bound) throws Invalid {
        Object value = txn.get(name);
        if (value == null) {
            return null;
        }
        if (!(value instanceof BigDecimal)) {
            throw new Invalid(name + " must be a number or null, got " + jsonType(value));
        }
        BigDecimal number = (BigDecimal) value;
        if (number.compareTo(BigDecimal.valueOf(-bound)) < 0 || number.compareTo(BigDecimal.valueOf(bound)) > 0) {
            throw new Invalid(name + " is out of range");
        }
        return Double.parseDouble(number.toString());
    }

    /** Python's ``not text.strip(" ")``. */
    private static boolean onlySpaces(String text) {
        for (int i = 0; i < text.length(); i++) {
            if (text.charAt(i) != ' ') {
                return false;
            }
        }
        return true;
    }
}
