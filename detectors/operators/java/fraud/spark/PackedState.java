package fraud.spark;

import java.sql.Date;
import java.util.Iterator;
import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.Option;

/**
 * A keyed operator's state kept in Spark's state store as one binary column ({@link StateCodec}): the
 * operator reads and writes rows of its own state schema, Spark sees {@link #SCHEMA}.
 */
final class PackedState implements GroupState<Row> {
    /** What Spark stores per key. */
    static final StructType SCHEMA = new StructType().add("packed", DataTypes.BinaryType, false);

    private final GroupState<Row> stored;
    private final StateCodec codec;

    private PackedState(GroupState<Row> stored, StateCodec codec) {
        this.stored = stored;
        this.codec = codec;
    }

    /** {@code function}, whose state rows have the schema {@code state}, over packed state. */
    static FlatMapGroupsWithStateFunction<Row, Row, Row, Row> packing(
            FlatMapGroupsWithStateFunction<Row, Row, Row, Row> function, StructType state) {
        return new Packing(function, new StateCodec(state));
    }

    private record Packing(FlatMapGroupsWithStateFunction<Row, Row, Row, Row> function, StateCodec codec)
            implements FlatMapGroupsWithStateFunction<Row, Row, Row, Row> {
        @Override
        public Iterator<Row> call(Row key, Iterator<Row> values, GroupState<Row> stored) throws Exception {
            return function.call(key, values, new PackedState(stored, codec));
        }
    }

    @Override
    public boolean exists() {
        return stored.exists();
    }

    @Override
    public Row get() {
        return codec.decode((byte[]) stored.get().get(0));
    }

    @Override
    public Option<Row> getOption() {
        return exists() ? Option.apply(get()) : Option.empty();
    }

    @Override
    public void update(Row state) {
        stored.update(RowFactory.create((Object) codec.encode(state)));
    }

    @Override
    public void remove() {
        stored.remove();
    }

    @Override
    public boolean hasTimedOut() {
        return stored.hasTimedOut();
    }

    @Override
    public void setTimeoutDuration(long durationMs) {
        stored.setTimeoutDuration(durationMs);
    }

    @Override
    public void setTimeoutDuration(String duration) {
        stored.setTimeoutDuration(duration);
    }

    @Override
    public void setTimeoutTimestamp(long timestampMs) {
        stored.setTimeoutTimestamp(timestampMs);
    }

    @Override
    public void setTimeoutTimestamp(long timestampMs, String additionalDuration) {
        stored.setTimeoutTimestamp(timestampMs, additionalDuration);
    }

    @Override
    public void setTimeoutTimestamp(Date timestamp) {
        stored.setTimeoutTimestamp(timestamp);
    }

    @Override
    public void setTimeoutTimestamp(Date timestamp, String additionalDuration) {
        stored.setTimeoutTimestamp(timestamp, additionalDuration);
    }

    @Override
    public long getCurrentWatermarkMs() {
        return stored.getCurrentWatermarkMs();
    }

    @Override
    public long getCurrentProcessingTimeMs() {
        return stored.getCurrentProcessingTimeMs();
    }
}
