package fraud.spark;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.sql.Timestamp;
import java.time.Instant;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampType;
import scala.collection.immutable.ArraySeq;

/**
 * A keyed operator's state row, of any schema built from strings, numbers, booleans, timestamps, arrays and
 * structs, as bytes and back: what {@link PackedState} stores in Spark's state store instead of the row itself.
 *
 * <p>Why: Spark (de)serializes a state row whose schema holds arrays with code it generates and compiles
 * again in every task of every micro-batch (the array's loop variable gets a new id each time, so its code
 * never hits the compiled-code cache), which cost the detector job's rules query a sixth of its CPU and kept
 * the JIT compiler busy (docs/performance.md). A binary state column is (de)serialized by code that is the
 * same every time.
 *
 * <p>Decoded rows are what Spark's row encoder would hand over: arrays as Scala sequences, structs as rows,
 * a timestamp as the Java type it was given in ({@code java.sql.Timestamp} or {@code Instant}).
 *
 * <p>Layout: the format byte, then (format 2) the fingerprint of the state schema, then the fields. Spark
 * sees only a binary column, so it cannot tell that a checkpoint's state was written for other columns
 * (a detector that now carries another set): the fingerprint does, and such a state, or one cut short,
 * stops the query with one line saying to start it from a new checkpoint instead of being misread.
 * Format 1 (no fingerprint) is still read.
 */
final class StateCodec implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final byte FORMAT = 2;             // first byte of every packed state
    private static final byte FORMAT_WITHOUT_FINGERPRINT = 1;
    private static final byte SQL_TIMESTAMP = 0;
    private static final byte INSTANT = 1;

    private final StructType schema;
    private final int fingerprint;

    StateCodec(StructType schema) {
        check(schema, "state");
        this.schema = schema;
        this.fingerprint = schema.catalogString().hashCode();
    }

    byte[] encode(Row row) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(256);
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeByte(FORMAT);
            out.writeInt(fingerprint);
            writeStruct(out, schema, row);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    Row decode(byte[] packed) {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(packed))) {
            byte format = in.readByte();
            if (format != FORMAT && format != FORMAT_WITHOUT_FINGERPRINT) {
                throw unreadable("in format " + format + ", this job reads " + FORMAT);
            }
            if (format == FORMAT && in.readInt() != fingerprint) {
                throw unreadable("written for other columns than this job's " + schema.catalogString());
            }
            Row row = readStruct(in, schema);
            if (in.available() > 0) {
                throw unreadable("longer than its columns " + schema.catalogString());
            }
            return row;
        } catch (Unreadable e) {
            throw e;
        } catch (IOException | RuntimeException e) {
            throw unreadable("not readable as " + schema.catalogString() + " (" + e + ")");
        }
    }

    /** A checkpoint's state this codec cannot read: the query stops with this one line. */
    private static final class Unreadable extends IllegalStateException {
        private static final long serialVersionUID = 1L;

        Unreadable(String message) {
            super(message);
        }
    }

    private static Unreadable unreadable(String why) {
        return new Unreadable("keyed operator state in the checkpoint " + why + ": start the query from a new checkpoint");
    }

    private static void check(DataType type, String where) {
        if (type instanceof StructType struct) {
            for (StructField field : struct.fields()) {
                check(field.dataType(), where + "." + field.name());
            }
        } else if (type instanceof ArrayType array) {
            check(array.elementType(), where + "[]");
        } else if (!(type instanceof StringType || type instanceof DoubleType || type instanceof LongType
                || type instanceof IntegerType || type instanceof BooleanType || type instanceof TimestampType)) {
            throw new IllegalArgumentException("a keyed operator cannot keep " + type.simpleString() + " (" + where
                    + ") in its state: strings, numbers, booleans, timestamps, arrays and structs only");
        }
    }

    private static void writeStruct(DataOutputStream out, StructType struct, Row row) throws IOException {
        StructField[] fields = struct.fields();
        for (int i = 0; i < fields.length; i++) {
            write(out, fields[i].dataType(), row.isNullAt(i) ? null : row.get(i));
        }
    }

    private static Row readStruct(DataInputStream in, StructType struct) throws IOException {
        StructField[] fields = struct.fields();
        Object[] values = new Object[fields.length];
        for (int i = 0; i < fields.length; i++) {
            values[i] = read(in, fields[i].dataType());
        }
        return RowFactory.create(values);
    }

    private static void write(DataOutputStream out, DataType type, Object value) throws IOException {
        out.writeBoolean(value != null);
        if (value == null) {
            return;
        }
        if (type instanceof StringType) {
            byte[] utf8 = ((String) value).getBytes(StandardCharsets.UTF_8);
            out.writeInt(utf8.length);
            out.write(utf8);
        } else if (type instanceof DoubleType) {
            out.writeDouble(((Number) value).doubleValue());
        } else if (type instanceof LongType) {
            out.writeLong(((Number) value).longValue());
        } else if (type instanceof IntegerType) {
            out.writeInt(((Number) value).intValue());
        } else if (type instanceof BooleanType) {
            out.writeBoolean((Boolean) value);
        } else if (type instanceof TimestampType) {
            out.writeByte(value instanceof Timestamp ? SQL_TIMESTAMP : INSTANT);
            out.writeLong(EventTimes.micros(value));
        } else if (type instanceof StructType struct) {
            writeStruct(out, struct, (Row) value);
        } else {
            DataType element = ((ArrayType) type).elementType();
            Object[] items = elements(value);
            out.writeInt(items.length);
            for (Object item : items) {
                write(out, element, item);
            }
        }
    }

    private static Object read(DataInputStream in, DataType type) throws IOException {
        if (!in.readBoolean()) {
            return null;
        }
        if (type instanceof StringType) {
            byte[] utf8 = new byte[in.readInt()];
            in.readFully(utf8);
            return new String(utf8, StandardCharsets.UTF_8);
        } else if (type instanceof DoubleType) {
            return in.readDouble();
        } else if (type instanceof LongType) {
            return in.readLong();
        } else if (type instanceof IntegerType) {
            return in.readInt();
        } else if (type instanceof BooleanType) {
            return in.readBoolean();
        } else if (type instanceof TimestampType) {
            byte kind = in.readByte();
            long micros = in.readLong();
            Instant instant = Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L),
                                                    Math.floorMod(micros, 1_000_000L) * 1000);
            return kind == SQL_TIMESTAMP ? Timestamp.from(instant) : instant;
        } else if (type instanceof StructType struct) {
            return readStruct(in, struct);
        }
        DataType element = ((ArrayType) type).elementType();
        Object[] items = new Object[in.readInt()];
        for (int i = 0; i < items.length; i++) {
            items[i] = read(in, element);
        }
        return ArraySeq.unsafeWrapArray(items);
    }

    /** An array value as the operators hand it over (a Java array) or as Spark does (a Scala sequence). */
    private static Object[] elements(Object value) {
        if (value instanceof Object[] array) {
            return array;
        }
        return scala.jdk.javaapi.CollectionConverters.asJava((scala.collection.Seq<?>) value).toArray();
    }
}
