import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

/** Serves "hello from NAME" on $NOMAD_PORT_http until it is stopped, and says goodbye when it is. */
public class Hello {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(System.getenv("NOMAD_PORT_http"));
        String greeting = "hello from " + System.getProperty("user.name") + " in "
                + System.getenv("NOMAD_ALLOC_NAME") + " on Java " + Runtime.version() + "\n";
        HttpServer server = HttpServer.create(new InetSocketAddress(port), 0);
        server.createContext("/", exchange -> {
            byte[] body = greeting.getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        // herder stops the JVM with SIGTERM: its shutdown hooks run.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> System.out.println("goodbye")));
        server.start();
        System.out.println("listening on " + port + " with at most "
                + Runtime.getRuntime().maxMemory() / (1024 * 1024) + " MiB of heap");
    }
}
