import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.BoltConnectorInternalSettings;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

/**
 * Embedded Neo4j Community with the Bolt connector on a loopback port, for local use and tests.
 *
 * Usage: Launcher --data DIR --port N [--host 127.0.0.1] [--page-cache-mb 256]
 * Prints one line "memsync-neo4j ready bolt://HOST:PORT version=V" once Bolt accepts connections,
 * and shuts the database down cleanly on SIGTERM or SIGINT.
 */
public final class Launcher {
    private Launcher() {}

    public static void main(String[] args) throws Exception {
        Path data = null;
        String host = "127.0.0.1";
        int port = 7687;
        long pageCacheMb = 256;
        for (int i = 0; i < args.length; i++) {
            String value = i + 1 < args.length ? args[i + 1] : null;
            switch (args[i]) {
                case "--data" -> { data = Path.of(require(args[i], value)); i++; }
                case "--host" -> { host = require(args[i], value); i++; }
                case "--port" -> { port = Integer.parseInt(require(args[i], value)); i++; }
                case "--page-cache-mb" -> { pageCacheMb = Long.parseLong(require(args[i], value)); i++; }
                default -> fail("unknown argument " + args[i]);
            }
        }
        if (data == null) {
            fail("--data DIR is required");
        }

        DatabaseManagementService service = new DatabaseManagementServiceBuilder(data.toAbsolutePath())
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress(host, port))
                .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                .setConfig(GraphDatabaseSettings.auth_enabled, false)
                .setConfig(GraphDatabaseSettings.pagecache_memory, pageCacheMb * 1024L * 1024L)
                .setConfig(GraphDatabaseSettings.keep_logical_logs, "false")
                // A local server stops in about a second instead of ten: Bolt's thread pool and
                // Netty's event loops otherwise wait 5 s each for work that never comes, and
                // open transactions 10 s. Clients retry what a stop cuts off.
                .setConfig(GraphDatabaseSettings.shutdown_transaction_end_timeout, Duration.ofSeconds(2))
                .setConfig(BoltConnectorInternalSettings.thread_pool_shutdown_wait_time, Duration.ofSeconds(1))
                .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0)
                .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_timeout, Duration.ofSeconds(2))
                .build();

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            service.shutdown();
            stopped.countDown();
        }, "memsync-neo4j-shutdown"));

        // Touch the default database so "ready" means queries will succeed, not just that Bolt listens.
        service.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME).executeTransactionally("RETURN 1");
        String version = org.neo4j.kernel.internal.Version.getNeo4jVersion();
        System.out.println("memsync-neo4j ready bolt://" + host + ":" + port + " version=" + version);
        System.out.flush();
        stopped.await();
    }

    private static String require(String flag, String value) {
        if (value == null) {
            fail(flag + " needs a value");
        }
        return value;
    }

    private static void fail(String message) {
        System.err.println("memsync-neo4j: " + message);
        System.exit(2);
    }
}
