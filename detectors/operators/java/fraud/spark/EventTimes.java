package fraud.spark;

import java.sql.Timestamp;
import java.time.Instant;

/** Event times as epoch microseconds, whichever Java type Spark's row encoder hands over. */
final class EventTimes {
    private EventTimes() {
    }

    static long micros(Object value) {
        if (value instanceof Timestamp ts) {
            return Math.floorDiv(ts.getTime(), 1000) * 1_000_000 + ts.getNanos() / 1000;
        }
        Instant instant = (Instant) value;
        return instant.getEpochSecond() * 1_000_000 + instant.getNano() / 1000;
    }
}
