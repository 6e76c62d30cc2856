// A real Debezium 3.6.3 deployment for the cut-over test: the embedded engine runs the connector
// with Kafka Connect 4.3's KafkaOffsetBackingStore, so its offsets go to the offsets topic of a
// Kafka-protocol broker in Kafka Connect's record format (key ["<name>", <partition>]), as a
// Kafka Connect worker running Debezium would write them.
//
//   java -cp DIR:LIBS/* DebeziumWorker ENGINE.properties OUT.jsonl
//
// Every change record is appended to OUT.jsonl as {"topic", "key", "value"} with the key and value
// written by Kafka Connect's JsonConverter (schemas.enable=false), one line per record, flushed
// before the record is marked processed (so a record is in the file before its offset can be
// committed). The engine stops when a file OUT.jsonl.stop appears or on SIGTERM: it then commits
// the offsets of what it handed over and exits 0. Exits 1 on an engine error.
import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import java.util.concurrent.*;

public class DebeziumWorker {
    static final ObjectMapper M = new ObjectMapper();

    static JsonConverter converter(boolean key) {
        JsonConverter c = new JsonConverter();
        c.configure(Map.of("schemas.enable", "false"), key);
        return c;
    }

    static String raw(byte[] b) { return b == null ? "null" : new String(b, StandardCharsets.UTF_8); }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (Reader r = Files.newBufferedReader(Paths.get(args[0]))) { props.load(r); }
        Path out = Paths.get(args[1]);
        Path stop = Paths.get(args[1] + ".stop");
        JsonConverter keys = converter(true), values = converter(false);
        Writer w = Files.newBufferedWriter(out, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        CountDownLatch ended = new CountDownLatch(1);
        final Throwable[] failure = {null};

        DebeziumEngine<RecordChangeEvent<SourceRecord>> engine = DebeziumEngine
            .create(ChangeEventFormat.of(Connect.class))
            .using(props)
            .using((success, message, error) -> {
                if (!success) failure[0] = error != null ? error : new RuntimeException(message);
                ended.countDown();
            })
            .notifying((records, committer) -> {
                for (RecordChangeEvent<SourceRecord> e : records) {
                    SourceRecord r = e.record();
                    String t = r.topic();
                    try {
                        w.write("{\"topic\":" + M.writeValueAsString(t) + ",\"key\":" + raw(keys.fromConnectData(t, r.keySchema(), r.key()))
                            + ",\"value\":" + raw(values.fromConnectData(t, r.valueSchema(), r.value())) + "}\n");
                        w.flush();
                    } catch (IOException ex) { throw new UncheckedIOException(ex); }
                    committer.markProcessed(e);
                }
                committer.markBatchFinished();
            })
            .build();

        ExecutorService ex = Executors.newSingleThreadExecutor();
        ex.execute(engine);
        Thread hook = new Thread(() -> {
            try { engine.close(); ended.await(60, TimeUnit.SECONDS); w.close(); } catch (Exception ignored) { }
        });
        Runtime.getRuntime().addShutdownHook(hook);
        while (!Files.exists(stop) && ended.getCount() > 0) Thread.sleep(100);
        Runtime.getRuntime().removeShutdownHook(hook);
        boolean running = ended.getCount() > 0;
        engine.close();
        ended.await(60, TimeUnit.SECONDS);
        ex.shutdown();
        ex.awaitTermination(60, TimeUnit.SECONDS);
        w.close();
        if (!running || failure[0] != null) {
            if (failure[0] != null) failure[0].printStackTrace();
            else System.err.println("the engine stopped before it was told to");
            System.exit(1);
        }
        System.exit(0);
    }
}
