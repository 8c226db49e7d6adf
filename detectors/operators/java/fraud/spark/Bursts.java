package fraud.spark;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * Every row of a key's bursts of at least {@code minCount} rows, reported once, as soon as its burst is that
 * long: a burst is a chain of the key's rows each less than {@code maxGap} after the previous one (the rows
 * a {@code session_window} of that gap would group). detectors/ops.py, {@code bursts}, is the Python side
 * and the specification.
 *
 * <p>Why not the session window: its aggregate comes out only when the watermark passes the session's
 * end (last row + gap), minutes of event time after the burst reached its size; here the rows are
 * reported in the micro-batch of the row that completes it, and each later row in its own.
 *
 * <p>A key's rows of one call are taken by event time, then id. Each row joins every open burst it is
 * within {@code maxGap} of (merging them); when the burst it joined has at least {@code minCount} rows, it
 * is emitted with the burst's rows not reported yet (itself included: the first time the whole burst so
 * far, then itself alone). A burst keeps only its unreported rows, besides its bounds, count and total,
 * so a restart with another {@code minCount} reports no row twice. Streaming: rows behind the watermark are dropped by
 * Spark (event-time timeout); a burst is forgotten when the watermark passes its last row plus
 * {@code maxGap} (no row can join it any more), the key when it has none. Static: one call per key with
 * all its rows, no state.
 */
public final class Bursts implements FlatMapGroupsWithStateFunction<Row, Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    private final int timeIndex;
    private final int idIndex;
    private final int valueIndex;
    private final int minCount;
    private final long maxGapMicros;
    private final boolean streaming;

    private Bursts(int timeIndex, int idIndex, int valueIndex, int minCount, long maxGapMicros,
                   boolean streaming) {
        this.timeIndex = timeIndex;
        this.idIndex = idIndex;
        this.valueIndex = valueIndex;
        this.minCount = minCount;
        this.maxGapMicros = maxGapMicros;
        this.streaming = streaming;
    }

    /**
     * The rows of {@code rows} (grouped by {@code key}) that report burst rows, with five more columns named
     * from {@code prefix}: {@code ids} (the ids reported, by event time, then id), and the burst's so far:
     * {@code count}, {@code total} (the sum of its {@code value}s), {@code first_ms} and {@code last_ms}
     * (its first and last event time, epoch milliseconds).
     */
    public static Dataset<Row> bursts(Dataset<Row> rows, String key, String time, String id, String value,
                                      int minCount, long maxGapMicros, String prefix) {
        StructType schema = rows.schema();
        StructType output = schema
                .add(prefix + "ids", DataTypes.createArrayType(DataTypes.StringType, false), false)
                .add(prefix + "count", DataTypes.LongType, false)
                .add(prefix + "total", DataTypes.DoubleType, false)
                .add(prefix + "first_ms", DataTypes.LongType, false)
                .add(prefix + "last_ms", DataTypes.LongType, false);
        StructType burst = new StructType()
                .add("first", DataTypes.LongType, false)
                .add("last", DataTypes.LongType, false)
                .add("count", DataTypes.LongType, false)
                .add("total", DataTypes.DoubleType, false)
                .add("times", DataTypes.createArrayType(DataTypes.LongType, false), false)
                .add("ids", DataTypes.createArrayType(DataTypes.StringType, false), false);
        StructType state = new StructType().add("bursts", DataTypes.createArrayType(burst, false), false);
        Bursts function = new Bursts(schema.fieldIndex(time), schema.fieldIndex(id), schema.fieldIndex(value),
                                     minCount, maxGapMicros, rows.isStreaming());
        return KeyedGroups.flatMapByKey(rows, key, function, state, output);
    }

    /** An open burst; its rows (time, id) not reported yet. */
    private static final class Burst {
        long first;
        long last;
        long count;
        double total;
        final List<Long> times = new ArrayList<>();
        final List<String> ids = new ArrayList<>();
    }

    @Override
    public Iterator<Row> call(Row key, Iterator<Row> values, GroupState<Row> state) {
        if (state.hasTimedOut()) {
            state.remove();
            return Collections.emptyIterator();
        }
        List<Row> fresh = KeyedGroups.sorted(values, KeyedGroups.oldestFirst(timeIndex, idIndex));
        List<Burst> open = streaming && state.exists() ? load(state.get()) : new ArrayList<>();

        List<Row> out = new ArrayList<>();
        for (Row row : fresh) {
            long t = EventTimes.micros(row.get(timeIndex));
            Burst joined = new Burst();
            joined.first = t;
            joined.last = t;
            joined.count = 1;
            joined.total = row.isNullAt(valueIndex) ? 0.0 : ((Number) row.get(valueIndex)).doubleValue();
            joined.times.add(t);
            joined.ids.add(row.getString(idIndex));
            for (Iterator<Burst> it = open.iterator(); it.hasNext(); ) {
                Burst b = it.next();
                if (t < b.last + maxGapMicros && t > b.first - maxGapMicros) {   // session windows overlap
                    it.remove();
                    joined.first = Math.min(joined.first, b.first);
                    joined.last = Math.max(joined.last, b.last);
                    joined.count += b.count;
                    joined.total += b.total;
                    joined.times.addAll(b.times);
                    joined.ids.addAll(b.ids);
                }
            }
            if (joined.count >= minCount) {
                out.add(reported(row, joined));
                joined.times.clear();
                joined.ids.clear();
            }
            open.add(joined);
        }
        if (streaming) {
            keep(open, state);
        }
        return out.iterator();
    }

    private Row reported(Row row, Burst burst) {
        List<Integer> order = new ArrayList<>(burst.ids.size());
        for (int i = 0; i < burst.ids.size(); i++) {
            order.add(i);
        }
        order.sort(Comparator.comparingLong((Integer i) -> burst.times.get(i)).thenComparing(burst.ids::get));
        String[] ids = order.stream().map(burst.ids::get).toArray(String[]::new);
        return KeyedGroups.appended(row, ids, burst.count, burst.total, Math.floorDiv(burst.first, 1000),
                                    Math.floorDiv(burst.last, 1000));
    }

    private static List<Burst> load(Row stored) {
        List<Burst> open = new ArrayList<>();
        for (Row r : stored.<Row>getList(0)) {
            Burst b = new Burst();
            b.first = r.getLong(0);
            b.last = r.getLong(1);
            b.count = r.getLong(2);
            b.total = r.getDouble(3);
            b.times.addAll(r.<Long>getList(4));
            b.ids.addAll(r.<String>getList(5));
            open.add(b);
        }
        return open;
    }

    /** Store the bursts a later row can still join; time the key out when the last of them closes. */
    private void keep(List<Burst> open, GroupState<Row> state) {
        long watermarkMicros = state.getCurrentWatermarkMs() * 1000;
        List<Row> kept = new ArrayList<>(open.size());
        long closes = Long.MIN_VALUE;
        for (Burst b : open) {
            if (b.last + maxGapMicros > watermarkMicros) {
                kept.add(RowFactory.create(b.first, b.last, b.count, b.total, b.times.toArray(new Long[0]),
                                           b.ids.toArray(new String[0])));
                closes = Math.max(closes, b.last + maxGapMicros);
            }
        }
        if (kept.isEmpty()) {
            state.remove();
            return;
        }
        state.update(RowFactory.create((Object) kept.toArray(new Row[0])));
        KeyedGroups.timeOutAt(state, closes);      // when no row can join any burst
    }
}
