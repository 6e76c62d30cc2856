// Records how Kafka Connect 4.3 signs internal requests (KIP-507) and writes its session key,
// with Connect's own classes: for each HMAC algorithm, a key from the JVM's KeyGenerator, the
// config-topic value of that key (KafkaConfigBackingStore's SESSION_KEY_V0 struct through the
// schemaless JsonConverter, as the config topic holds it) and the headers that
// InternalRequestSignature.addToRequest puts on a request with a task-config body.
// Prints a JSON array on stdout. See record_signatures.sh.
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Map;
import javax.crypto.KeyGenerator;
import javax.crypto.SecretKey;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.distributed.Crypto;
import org.apache.kafka.connect.runtime.rest.InternalRequestSignature;
import org.eclipse.jetty.client.HttpClient;
import org.eclipse.jetty.client.Request;

public class RecordSignatures {
    public static void main(String[] args) throws Exception {
        Schema sessionKeyV0 = SchemaBuilder.struct()
            .field("key", Schema.STRING_SCHEMA)
            .field("algorithm", Schema.STRING_SCHEMA)
            .field("creation-timestamp", Schema.INT64_SCHEMA)
            .build();
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", "false"), false);
        HttpClient client = new HttpClient();
        String[][] cases = {
            {"HmacSHA256", "[{\"connector.class\":\"FileStreamSource\",\"file\":\"/tmp/in.txt\",\"task.class\":\"org.apache.kafka.connect.file.FileStreamSourceTask\",\"topic\":\"lines\"}]"},
            {"HmacSHA1", "[]"},
            {"HmacSHA384", "[{\"a\":\"1\"},{\"a\":\"2\"}]"},
            {"HmacSHA512", ""},
        };
        StringBuilder out = new StringBuilder("[\n");
        for (int i = 0; i < cases.length; i++) {
            String algorithm = cases[i][0];
            byte[] body = cases[i][1].getBytes(StandardCharsets.UTF_8);
            KeyGenerator generator = Crypto.SYSTEM.keyGenerator(algorithm);
            SecretKey key = generator.generateKey();
            Struct value = new Struct(sessionKeyV0)
                .put("key", Base64.getEncoder().encodeToString(key.getEncoded()))
                .put("algorithm", key.getAlgorithm())
                .put("creation-timestamp", 1764800000000L + i);
            String stored = new String(converter.fromConnectData("connect-configs", sessionKeyV0, value), StandardCharsets.UTF_8);
            Request request = client.newRequest("http://127.0.0.1:8083/connectors/lines/tasks");
            InternalRequestSignature.addToRequest(Crypto.SYSTEM, key, body, algorithm, request);
            out.append("  {\"algorithm\": \"").append(request.getHeaders().get(InternalRequestSignature.SIGNATURE_ALGORITHM_HEADER))
                .append("\", \"key_bits\": ").append(key.getEncoded().length * 8)
                .append(", \"session_key\": ").append(stored)
                .append(", \"body\": \"").append(cases[i][1].replace("\\", "\\\\").replace("\"", "\\\""))
                .append("\", \"signature\": \"").append(request.getHeaders().get(InternalRequestSignature.SIGNATURE_HEADER))
                .append("\"}").append(i + 1 < cases.length ? ",\n" : "\n");
        }
        out.append("]\n");
        System.out.print(out);
    }
}
