package fraud.spark;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.streaming.GroupStateTimeout;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.StructType;

/** What the job's keyed operators (RecentPairs, RecentHistory, Bursts) share: how they group and order rows. */
final class KeyedGroups {
    private KeyedGroups() {
    }

    /**
     * {@code function} over {@code rows} grouped by the column {@code key}: event-time timeouts on a stream,
     * none on a static Dataset (one call per key, no state). Its state rows have the schema {@code state};
     * Spark keeps them packed ({@link PackedState}).
     */
    static Dataset<Row> flatMapByKey(Dataset<Row> rows, String key,
                                     FlatMapGroupsWithStateFunction<Row, Row, Row, Row> function,
                                     StructType state, StructType output) {
        StructType schema = rows.schema();
        StructType keySchema = new StructType().add(schema.apply(key));
        GroupStateTimeout timeout = rows.isStreaming() ? GroupStateTimeout.EventTimeTimeout()
                                                       : GroupStateTimeout.NoTimeout();
        // groupBy(key).as(...) keeps the key column itself as the grouping attribute (groupByKey would
        // add a computed key): the rows, already partitioned by card, need no shuffle.
        return rows.groupBy(key)
                .as(Encoders.row(keySchema), Encoders.row(schema))
                .flatMapGroupsWithState(PackedState.packing(function, state), OutputMode.Append(),
                                        Encoders.row(PackedState.SCHEMA), Encoders.row(output), timeout);
    }

    /** Rows by event time, then id. */
    static Comparator<Row> oldestFirst(int timeIndex, int idIndex) {
        return Comparator.comparingLong((Row row) -> EventTimes.micros(row.get(timeIndex)))
                .thenComparing(row -> row.getString(idIndex));
    }

    /** A call's rows, oldest first. */
    static List<Row> sorted(Iterator<Row> values, Comparator<Row> order) {
        List<Row> rows = new ArrayList<>();
        values.forEachRemaining(rows::add);
        rows.sort(order);
        return rows;
    }

    /** {@code row} with {@code more} values appended, for an output schema of the input's plus columns. */
    static Row appended(Row row, Object... more) {
        Object[] fields = new Object[row.length() + more.length];
        for (int f = 0; f < row.length(); f++) {
            fields[f] = row.get(f);
        }
        System.arraycopy(more, 0, fields, row.length(), more.length);
        return RowFactory.create(fields);
    }

    /**
     * Time the key out at {@code micros} of event time. A row between the previous batch's watermark (which
     * drops late rows) and the current one can put that behind the current watermark, which Spark refuses:
     * the key is then evicted at the next batch.
     */
    static void timeOutAt(GroupState<Row> state, long micros) {
        state.setTimeoutTimestamp(Math.max(Math.floorDiv(micros, 1000), state.getCurrentWatermarkMs() + 1));
    }
}
