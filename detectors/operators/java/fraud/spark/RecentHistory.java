package fraud.spark;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
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
 * Every row with its key's history before it: the (event time, value) entries the key had learnt when the
 * row came (detectors/ops.py, {@code with_history}, is the Python side and the specification), as one
 * keyed stateful operator, so that the scoring after it is stateless.
 *
 * <p>Why not Python state ({@code applyInPandasWithState}): Spark allows one per query, pays a Python
 * round trip per group and batch, and a bucket of keys in one state row is rewritten whole every batch;
 * here each key has its own state row and a micro-batch reads and writes only the keys it touches.
 *
 * <p>A key's rows of one call are taken by event time, then id. Each row is emitted with the entries
 * learnt so far (the state's, then those of the call's earlier rows), oldest learnt first; then the row
 * is learnt unless it comes less than {@code minGap} after the key's newest event time (0: always). At
 * most {@code maxEntries} are kept (0: no limit), and none older than {@code keep} before the key's
 * newest event time (0: no limit). Streaming: rows behind the watermark are dropped by Spark (event-time
 * timeout); a key is forgotten {@code idle} after its newest event time. Static: one call per key with
 * all its rows, no state.
 */
public final class RecentHistory implements FlatMapGroupsWithStateFunction<Row, Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    private final int timeIndex;
    private final int idIndex;
    private final int valueIndex;
    private final int maxEntries;
    private final long minGapMicros;
    private final long keepMicros;
    private final long idleMicros;
    private final boolean streaming;

    private RecentHistory(int timeIndex, int idIndex, int valueIndex, int maxEntries, long minGapMicros,
                          long keepMicros, long idleMicros, boolean streaming) {
        this.timeIndex = timeIndex;
        this.idIndex = idIndex;
        this.valueIndex = valueIndex;
        this.maxEntries = maxEntries;
        this.minGapMicros = minGapMicros;
        this.keepMicros = keepMicros;
        this.idleMicros = idleMicros;
        this.streaming = streaming;
    }

    /**
     * {@code rows} (grouped by {@code key}) with two more columns: {@code times} (the history's event times,
     * epoch milliseconds) and {@code values} (its values of the {@code value} column, as doubles).
     */
    public static Dataset<Row> history(Dataset<Row> rows, String key, String time, String id, String value,
                                       int maxEntries, long minGapMicros, long keepMicros, long idleMicros,
                                       String times, String values) {
        StructType schema = rows.schema();
        StructType output = schema
                .add(times, DataTypes.createArrayType(DataTypes.LongType, false), false)
                .add(values, DataTypes.createArrayType(DataTypes.DoubleType, false), false);
        StructType state = new StructType()
                .add("newest", DataTypes.LongType, false)
                .add("times", DataTypes.createArrayType(DataTypes.LongType, false), false)
                .add("values", DataTypes.createArrayType(DataTypes.DoubleType, false), false);
        RecentHistory function = new RecentHistory(schema.fieldIndex(time), schema.fieldIndex(id),
                schema.fieldIndex(value), maxEntries, minGapMicros, keepMicros, idleMicros, rows.isStreaming());
        return KeyedGroups.flatMapByKey(rows, key, function, state, output);
    }

    @Override
    public Iterator<Row> call(Row key, Iterator<Row> values, GroupState<Row> state) {
        if (state.hasTimedOut()) {
            state.remove();
            return Collections.emptyIterator();
        }
        List<Row> fresh = KeyedGroups.sorted(values, KeyedGroups.oldestFirst(timeIndex, idIndex));

        ArrayDeque<Long> times = new ArrayDeque<>();        // micros, oldest learnt first
        ArrayDeque<Double> learnt = new ArrayDeque<>();
        long newest = Long.MIN_VALUE;
        boolean known = false;
        if (streaming && state.exists()) {
            Row stored = state.get();
            newest = stored.getLong(0);
            known = true;
            List<Long> storedTimes = stored.getList(1);
            List<Double> storedValues = stored.getList(2);
            for (int i = 0; i < storedTimes.size(); i++) {
                times.addLast(storedTimes.get(i));
                learnt.addLast(storedValues.get(i));
            }
        }

        List<Row> out = new ArrayList<>(fresh.size());
        for (Row row : fresh) {
            out.add(withHistory(row, times, learnt));
            long t = EventTimes.micros(row.get(timeIndex));
            boolean learn = !known || Math.abs(t - newest) >= minGapMicros;
            newest = known ? Math.max(newest, t) : t;
            known = true;
            if (learn && !row.isNullAt(valueIndex)) {
                times.addLast(t);
                learnt.addLast(((Number) row.get(valueIndex)).doubleValue());
                if (maxEntries > 0 && learnt.size() > maxEntries) {
                    times.pollFirst();
                    learnt.pollFirst();
                }
            }
        }
        if (streaming && known) {
            keep(newest, times, learnt, state);
        }
        return out.iterator();
    }

    private static Row withHistory(Row row, ArrayDeque<Long> times, ArrayDeque<Double> learnt) {
        long[] millis = new long[times.size()];
        double[] amounts = new double[learnt.size()];
        int i = 0;
        for (long t : times) {
            millis[i++] = Math.floorDiv(t, 1000);
        }
        i = 0;
        for (Double v : learnt) {
            amounts[i++] = v;
        }
        return KeyedGroups.appended(row, millis, amounts);
    }

    /** Store the entries still within {@code keep} of the newest event time; time the key out when idle. */
    private void keep(long newest, ArrayDeque<Long> times, ArrayDeque<Double> learnt, GroupState<Row> state) {
        List<Long> keptTimes = new ArrayList<>(times.size());
        List<Double> keptValues = new ArrayList<>(learnt.size());
        Iterator<Double> value = learnt.iterator();
        for (long t : times) {
            double v = value.next();
            if (keepMicros <= 0 || t > newest - keepMicros) {
                keptTimes.add(t);
                keptValues.add(v);
            }
        }
        state.update(RowFactory.create(newest, keptTimes.toArray(new Long[0]), keptValues.toArray(new Double[0])));
        KeyedGroups.timeOutAt(state, newest + idleMicros);
    }
}
