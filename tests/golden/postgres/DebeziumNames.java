// Prints how Debezium 3.6.3's SchemaNameAdjuster constants (AVRO, AVRO_UNICODE and their field
// namers) adjust a few names, one tab-separated line per name; recorded into
// crates/connectors/src/postgres/names.rs.
//   javac -cp "LIBS/*" DebeziumNames.java && java -cp ".:LIBS/*" DebeziumNames
// (LIBS: tests/services/debezium.sh libs)
import io.debezium.schema.SchemaNameAdjuster;
public class DebeziumNames {
    public static void main(String[] a) {
        String[] names = {"srv.public.items.Value", "srv.public.my-table.Value", "srv.1public.t$x.Key", "9lives", "a.b-c.d", "x.é.y", "ok_name", "col.with.dots", "1st col", "naïve", "-", "_a"};
        SchemaNameAdjuster[] adj = {SchemaNameAdjuster.AVRO, SchemaNameAdjuster.AVRO_UNICODE, SchemaNameAdjuster.AVRO_FIELD_NAMER, SchemaNameAdjuster.AVRO_UNICODE_FIELD_NAMER};
        for (String n : names) {
            StringBuilder sb = new StringBuilder(n);
            for (SchemaNameAdjuster x : adj) sb.append('\t').append(x.adjust(n));
            System.out.println(sb);
        }
    }
}
