package fraud.spark;

import java.util.ArrayDeque;
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
 * Every pair of rows with the same key whose event times lie at most {@code maxGap} apart, oldest first:
 * what a stream-stream self-join with an event-time range condition finds (detectors/ops.py,
 * {@code pairs_within}, is the Python side and the specification), as one keyed stateful operator.
 *
 * <p>Why not the join: each side of a self-join keeps its own copy of the rows in two state stores and
 * Spark plans both sides every micro-batch; here one state row per key holds that key's rows that can
 * still pair, and only the keys a micro-batch touches are read and written.
 *
 * <p>Streaming: rows behind the watermark are dropped by Spark before the function (event-time timeout);
 * a key's rows stay in its state while {@code event_time + maxGap} is not behind the watermark, and the
 * key times out (its state is removed) when none can pair any more. Static: one call per key with all its
 * rows, no state. A pair is emitted once, when the later of its two rows to arrive is seen; two rows are
 * ordered by event time, then by id, and rows with the same id never pair.
 */
public final class RecentPairs implements FlatMapGroupsWithStateFunction<Row, Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    private final int timeIndex;
    private final int idIndex;
    private final long maxGapMicros;
    private final boolean streaming;

    private RecentPairs(int timeIndex, int idIndex, long maxGapMicros, boolean streaming) {
        this.timeIndex = timeIndex;
        this.idIndex = idIndex;
        this.maxGapMicros = maxGapMicros;
        this.streaming = streaming;
    }

    /**
     * The pairs of {@code rows} (grouped by {@code key}) as rows of two structs named {@code earlier} and
     * {@code later}, each with {@code rows}' schema.
     */
    public static Dataset<Row> pairs(Dataset<Row> rows, String key, String time, String id,
                                     long maxGapMicros, String earlier, String later) {
        StructType schema = rows.schema();
        StructType output = new StructType().add(earlier, schema, false).add(later, schema, false);
        StructType state = new StructType().add("rows", DataTypes.createArrayType(schema, false), false);
        RecentPairs function = new RecentPairs(schema.fieldIndex(time), schema.fieldIndex(id), maxGapMicros,
                                               rows.isStreaming());
        return KeyedGroups.flatMapByKey(rows, key, function, state, output);
    }

    @Override
    public Iterator<Row> call(Row key, Iterator<Row> values, GroupState<Row> state) {
        if (state.hasTimedOut()) {
            state.remove();
            return Collections.emptyIterator();
        }
        Comparator<Row> oldestFirst = KeyedGroups.oldestFirst(timeIndex, idIndex);
        List<Row> fresh = KeyedGroups.sorted(values, oldestFirst);
        List<Row> stored = streaming && state.exists() ? state.get().getList(0) : List.of();

        List<Row> out = new ArrayList<>();
        ArrayDeque<Row> window = new ArrayDeque<>();     // earlier fresh rows within maxGap of the current one
        for (Row row : fresh) {
            long t = micros(row);
            for (Row old : stored) {
                pair(old, row, oldestFirst, out);
            }
            while (!window.isEmpty() && micros(window.peekFirst()) < t - maxGapMicros) {
                window.pollFirst();
            }
            for (Row before : window) {
                pair(before, row, oldestFirst, out);
            }
            window.addLast(row);
        }
        if (streaming) {
            keep(stored, fresh, state);
        }
        return out.iterator();
    }

    private void pair(Row a, Row b, Comparator<Row> oldestFirst, List<Row> out) {
        if (id(a).equals(id(b)) || Math.abs(micros(a) - micros(b)) > maxGapMicros) {
            return;
        }
        out.add(oldestFirst.compare(a, b) <= 0 ? RowFactory.create(a, b) : RowFactory.create(b, a));
    }

    /** Keep the rows a later row can still pair with; time the key out when there are none. */
    private void keep(List<Row> stored, List<Row> fresh, GroupState<Row> state) {
        long watermarkMicros = state.getCurrentWatermarkMs() * 1000;
        List<Row> kept = new ArrayList<>(stored.size() + fresh.size());
        long newest = Long.MIN_VALUE;
        for (List<Row> rows : List.of(stored, fresh)) {
            for (Row row : rows) {
                long t = micros(row);
                if (t + maxGapMicros >= watermarkMicros) {
                    kept.add(row);
                    newest = Math.max(newest, t);
                }
            }
        }
        if (kept.isEmpty()) {
            state.remove();
            return;
        }
        state.update(RowFactory.create((Object) kept.toArray(new Row[0])));
        // Spark times a key out once its timestamp is behind the watermark: exactly when no row can pair.
        state.setTimeoutTimestamp(Math.floorDiv(newest + maxGapMicros, 1000));
    }

    private String id(Row row) {
        return row.getString(idIndex);
    }

    private long micros(Row row) {
        return EventTimes.micros(row.get(timeIndex));
    }
}
