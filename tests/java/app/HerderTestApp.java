import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import sun.misc.Signal;

/**
 * The JVM application of herder's java driver tests, compiled with javac and packed with jar at test time.
 *
 * <p>The first argument says what it does:
 * <ul>
 *   <li>{@code exit CODE}: exits with CODE.</li>
 *   <li>{@code print TEXT}: prints TEXT and exits 0.</li>
 *   <li>{@code env}: prints its environment ({@code env NAME=value}), its system properties
 *       ({@code prop NAME=value}), the JVM's options ({@code jvmarg OPTION}) and the heap's maximum
 *       ({@code maxMemory BYTES}).</li>
 *   <li>{@code exists PATH...}: prints {@code PATH yes} or {@code PATH no} for each.</li>
 *   <li>{@code serve PORT}: serves HTTP on PORT; a shutdown hook prints "shutdown hook ran" when the JVM
 *       stops.</li>
 *   <li>{@code connect HOST PORT}: opens a TCP connection to HOST:PORT, writes a line, exits.</li>
 *   <li>{@code until-killed}: starts a child ({@code sleep}), writes "PID CHILD" into $READY_FILE, waits.</li>
 *   <li>{@code report-signal}: on SIGINT or SIGTERM, writes INT or TERM into $SIGNAL_FILE and exits 0;
 *       writes its pid into $READY_FILE once its handlers are in place.</li>
 *   <li>{@code ignore-signals}: ignores SIGINT and SIGTERM, with a child ({@code sh}, then {@code sleep})
 *       that ignores them too; writes "PID CHILD" into $READY_FILE.</li>
 *   <li>{@code hold-memory MIB}: fills an array of MIB MiB, then as {@code until-killed}.</li>
 *   <li>{@code spin}: writes its pid into $READY_FILE and keeps a CPU busy.</li>
 * </ul>
 */
public class HerderTestApp {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "exit" -> System.exit(Integer.parseInt(args[1]));
            case "print" -> System.out.println(args[1]);
            case "env" -> env();
            case "exists" -> {
                for (int i = 1; i < args.length; i++) {
                    System.out.println(args[i] + (Files.exists(Path.of(args[i])) ? " yes" : " no"));
                }
            }
            case "serve" -> serve(Integer.parseInt(args[1]));
            case "connect" -> {
                try (Socket socket = new Socket(args[1], Integer.parseInt(args[2]))) {
                    socket.getOutputStream().write("hello\n".getBytes(StandardCharsets.UTF_8));
                }
            }
            case "until-killed" -> {
                Process child = new ProcessBuilder("sleep", "3600").start();
                ready(pid() + " " + child.pid());
                child.waitFor();
            }
            case "report-signal" -> {
                for (String name : List.of("INT", "TERM")) {
                    Signal.handle(new Signal(name), signal -> {
                        write(System.getenv("SIGNAL_FILE"), signal.getName());
                        Runtime.getRuntime().halt(0);
                    });
                }
                ready(String.valueOf(pid()));
                Thread.sleep(3_600_000);
            }
            case "ignore-signals" -> {
                for (String name : List.of("INT", "TERM")) {
                    Signal.handle(new Signal(name), signal -> { });
                }
                Process child = new ProcessBuilder("sh", "-c", "trap '' INT TERM; exec sleep 3600").start();
                ready(pid() + " " + child.pid());
                child.waitFor();
                Thread.sleep(3_600_000);
            }
            case "hold-memory" -> {
                byte[] held = new byte[Integer.parseInt(args[1]) << 20];
                Arrays.fill(held, (byte) 1);  // touched, so resident
                Process child = new ProcessBuilder("sleep", "3600").start();
                ready(pid() + " " + child.pid());
                child.waitFor();
                System.out.println(held[held.length - 1]);  // keeps the array reachable until then
            }
            case "spin" -> {
                ready(Long.toString(pid()));
                while (!Thread.interrupted()) {
                    Thread.onSpinWait();
                }
            }
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    private static long pid() {
        return ProcessHandle.current().pid();
    }

    private static void env() {
        for (Map.Entry<String, String> entry : new TreeMap<>(System.getenv()).entrySet()) {
            System.out.println("env " + entry.getKey() + "=" + entry.getValue());
        }
        List<String> names = new ArrayList<>(System.getProperties().stringPropertyNames());
        names.sort(null);
        for (String name : names) {
            System.out.println("prop " + name + "=" + System.getProperty(name));
        }
        for (String argument : java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            System.out.println("jvmarg " + argument);
        }
        System.out.println("maxMemory " + Runtime.getRuntime().maxMemory());
    }

    private static void serve(int port) throws IOException {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("shutdown hook ran");
            System.out.flush();
        }));
        HttpServer server = HttpServer.create(new InetSocketAddress(port), 0);
        server.createContext("/", exchange -> {
            byte[] body = ("hello from java in " + System.getenv("NOMAD_ALLOC_NAME") + "\n")
                    .getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        server.start();
        System.out.println("serving on " + port);
        System.out.flush();
        String readyFile = System.getenv("READY_FILE");
        if (readyFile != null) {
            ready(String.valueOf(pid()));
        }
    }

    private static void ready(String text) {
        write(System.getenv("READY_FILE"), text);
    }

    private static void write(String file, String text) {
        try {
            Path path = Path.of(file);
            Path partial = path.resolveSibling(path.getFileName() + ".partial");
            Files.writeString(partial, text + "\n");
            Files.move(partial, path, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }
}
