// Runs Debezium's embedded engine (Connect format: raw SourceRecords) and writes every record through
// Kafka Connect's JsonConverter (schemas.enable=true; false; false with replace.null.with.default=false),
// as one JSON line
// {"topic":...,"key":...,"value":...[,"headers":[{"key":...,"value":...}]]} per record. key/value
// are the converter's bytes verbatim (key order as JsonConverter wrote it); a null value (tombstone)
// is written as null. headers appear only when the record has any.
//
//   java -cp DIR:LIBS/* RecordDebezium ENGINE.properties OUTDIR
//
// Writes OUTDIR/{schemas,noschemas,noschemas-nodefault}/<topic>.jsonl, OUTDIR/offsets.jsonl
// ({topic, partition, offset} per record), and touches OUTDIR/.snapshot-done when the record with
// source.snapshot="last" has been written. It stops at the first logical-decoding message whose
// prefix is "golden-end" (not written) and exits 0; exits 1 after 300 s without it or on an engine
// error. Used by record_debezium.py, which compiles it into /tmp.
import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import java.util.concurrent.*;

public class RecordDebezium {
    static final ObjectMapper M = new ObjectMapper();
    static final Map<String, Writer> writers = new HashMap<>();
    static Path out;

    static JsonConverter converter(boolean schemas, String type, boolean replaceNull) {
        JsonConverter c = new JsonConverter();
        c.configure(Map.of("schemas.enable", String.valueOf(schemas), "converter.type", type,
            "replace.null.with.default", String.valueOf(replaceNull)), type.equals("key"));
        return c;
    }

    // [flavour][key, value, header]: schemas on; schemas off; schemas off with
    // replace.null.with.default=false (JsonConverter's default is true)
    static final String[] DIRS = {"schemas/", "noschemas/", "noschemas-nodefault/"};
    static final JsonConverter[][] conv = {
        {converter(true, "key", true), converter(true, "value", true), converter(true, "header", true)},
        {converter(false, "key", true), converter(false, "value", true), converter(false, "header", true)},
        {converter(false, "key", false), converter(false, "value", false), converter(false, "header", false)}};

    static String raw(byte[] b) { return b == null ? "null" : new String(b, StandardCharsets.UTF_8); }

    static void write(String file, String line) throws IOException {
        Writer w = writers.get(file);
        if (w == null) {
            Path p = out.resolve(file);
            Files.createDirectories(p.getParent());
            w = Files.newBufferedWriter(p, StandardCharsets.UTF_8);
            writers.put(file, w);
        }
        w.write(line);
        w.write('\n');
        w.flush();
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (Reader r = Files.newBufferedReader(Paths.get(args[0]))) { props.load(r); }
        out = Paths.get(args[1]);
        Files.createDirectories(out);
        CountDownLatch end = new CountDownLatch(1);
        final Throwable[] failure = {null};
        final boolean[] sawEnd = {false};

        DebeziumEngine<RecordChangeEvent<SourceRecord>> engine = DebeziumEngine
            .create(ChangeEventFormat.of(Connect.class))
            .using(props)
            .using((success, message, error) -> {
                if (!success && !sawEnd[0]) { failure[0] = error != null ? error : new RuntimeException(message); }
                end.countDown();
            })
            .notifying((records, committer) -> {
                for (RecordChangeEvent<SourceRecord> e : records) {
                    SourceRecord r = e.record();
                    if (sawEnd[0]) { committer.markProcessed(e); continue; }
                    if (r.value() instanceof Struct && r.valueSchema().field("message") != null) {
                        Struct m = ((Struct) r.value()).getStruct("message");
                        if (m != null && "golden-end".equals(m.getString("prefix"))) {
                            sawEnd[0] = true;
                            committer.markProcessed(e);
                            continue;
                        }
                    }
                    try {
                        String t = r.topic();
                        for (int s = 0; s < DIRS.length; s++) {
                            StringBuilder sb = new StringBuilder();
                            sb.append("{\"topic\":").append(M.writeValueAsString(t));
                            sb.append(",\"key\":").append(raw(conv[s][0].fromConnectData(t, r.keySchema(), r.key())));
                            sb.append(",\"value\":").append(raw(conv[s][1].fromConnectData(t, r.valueSchema(), r.value())));
                            if (r.headers() != null && !r.headers().isEmpty()) {
                                sb.append(",\"headers\":[");
                                boolean first = true;
                                for (Header h : r.headers()) {
                                    if (!first) sb.append(',');
                                    first = false;
                                    sb.append("{\"key\":").append(M.writeValueAsString(h.key()));
                                    sb.append(",\"value\":").append(raw(conv[s][2].fromConnectHeader(t, h.key(), h.schema(), h.value())));
                                    sb.append('}');
                                }
                                sb.append(']');
                            }
                            sb.append('}');
                            write(DIRS[s] + t + ".jsonl", sb.toString());
                        }
                        Map<String, Object> o = new LinkedHashMap<>();
                        o.put("topic", t);
                        o.put("partition", r.sourcePartition());
                        o.put("offset", r.sourceOffset());
                        write("offsets.jsonl", M.writeValueAsString(o));
                        if (r.value() instanceof Struct && r.valueSchema().field("source") != null) {
                            Struct src = ((Struct) r.value()).getStruct("source");
                            Object snap = src.schema().field("snapshot") != null ? src.get("snapshot") : null;
                            if ("last".equals(String.valueOf(snap))) Files.write(out.resolve(".snapshot-done"), new byte[0]);
                        }
                    } catch (IOException ex) { throw new UncheckedIOException(ex); }
                    committer.markProcessed(e);
                }
                committer.markBatchFinished();
                if (sawEnd[0]) end.countDown();
            })
            .build();

        ExecutorService ex = Executors.newSingleThreadExecutor();
        ex.execute(engine);
        boolean done = end.await(300, TimeUnit.SECONDS);
        engine.close();
        ex.shutdown();
        ex.awaitTermination(60, TimeUnit.SECONDS);
        for (Writer w : writers.values()) w.close();
        if (!done) { System.err.println("no golden-end message within 300 s"); System.exit(1); }
        if (failure[0] != null && !sawEnd[0]) { failure[0].printStackTrace(); System.exit(1); }
        System.exit(sawEnd[0] ? 0 : 1);
    }
}
