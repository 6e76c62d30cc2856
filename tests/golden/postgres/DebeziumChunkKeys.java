// Prints how Debezium 3.6.3 writes incremental-snapshot chunk keys into offsets
// (AbstractIncrementalSnapshotContext.arrayToSerializedString, called by reflection), one
// "<description>\t<hex>" line per key; recorded into crates/connectors/src/postgres/java_keys.rs.
//   javac -cp "LIBS/*" DebeziumChunkKeys.java && java -Duser.timezone=UTC -cp ".:LIBS/*" DebeziumChunkKeys
// (LIBS: tests/services/debezium.sh libs)
import io.debezium.pipeline.source.snapshot.incremental.AbstractIncrementalSnapshotContext;
import io.debezium.pipeline.source.snapshot.incremental.SignalBasedIncrementalSnapshotContext;
import java.lang.reflect.Method;
import java.math.BigDecimal;
import java.util.UUID;

public class DebeziumChunkKeys {
    public static void main(String[] args) throws Exception {
        Method m = AbstractIncrementalSnapshotContext.class.getDeclaredMethod("arrayToSerializedString", Object[].class);
        m.setAccessible(true);
        Object ctx = new SignalBasedIncrementalSnapshotContext<Object>();
        Object[][] keys = {
            {5}, {-7}, {9_000_000_000L}, {"a'b"}, {1, "x"}, {2L, 3L},
            {UUID.fromString("123e4567-e89b-12d3-a456-426614174000")}, {new BigDecimal("12.50")}, {new BigDecimal("-98765432109876543210.123")},
            {"é€"}, {(short) 4},
            // Run with -Duser.timezone=UTC, as pgjdbc reads these in the JVM's time zone.
            {java.sql.Timestamp.valueOf("2024-01-02 03:04:05.123456")}, {java.sql.Timestamp.valueOf("1969-12-31 23:59:59.5")},
            {java.sql.Timestamp.valueOf("2024-01-02 03:04:05")}, {java.sql.Date.valueOf("2024-01-02")}, {java.sql.Date.valueOf("1960-07-09")},
            {Boolean.TRUE}, {7, java.sql.Timestamp.valueOf("2000-02-29 12:00:00.000001")},
        };
        for (Object[] k : keys) {
            StringBuilder d = new StringBuilder();
            for (Object o : k) d.append(o.getClass().getSimpleName()).append('=').append(o).append(';');
            System.out.println(d + "\t" + m.invoke(ctx, (Object) k));
        }
    }
}
