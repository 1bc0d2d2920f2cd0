/*
 * ActiveMQ Java clients (the failover: transport of activemq-client) driven over stdin/stdout
 * by benchmarks/bench_rebalance.py, so that our rebalancing is measured against the Java client
 * on the same brokers, in the same run, through the same scenarios.
 *
 * One ActiveMQConnection per client id, all with the same failover: URI. A sampler thread reads
 * each connection's FailoverTransport.getConnectedTransportURI() every few milliseconds and
 * records every change of broker with System.nanoTime(), which on Linux is CLOCK_MONOTONIC:
 * the same clock as Python's time.monotonic(), so the benchmark compares the times directly.
 * Sampling rather than transport listeners: it records every kind of move the same way
 * (failover, rebalance, return to a priority broker), whatever callbacks each one makes.
 *
 * Commands (one a line); every reply ends with a line "ok ..." or "error <reason>":
 *   open <failover-uri> <client-id>...  open one connection per id (started, so connected)
 *   report                              "client <id> <uri|-> <nanos>=<uri>,..." for each client:
 *                                       where it is now and every broker it was on, in order
 *   status                              "ok <now-nanos> <last-change-nanos> <connected> <total>"
 *   close                               close every connection
 *   quit                                close every connection and exit
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.transport.failover.FailoverTransport;

public final class RebalanceClients {

    private static final long SAMPLE_MILLIS = 5;

    /** One client: its connection and the brokers it was on (guarded by itself). */
    private static final class Client {
        final String id;
        final ActiveMQConnection connection;
        final FailoverTransport failover;
        final List<Long> times = new ArrayList<>();
        final List<String> brokers = new ArrayList<>();

        Client(String id, ActiveMQConnection connection) {
            this.id = id;
            this.connection = connection;
            FailoverTransport found = connection.getTransport().narrow(FailoverTransport.class);
            if (found == null) {
                throw new IllegalArgumentException("the URI does not make a failover transport");
            }
            this.failover = found;
        }

        /** The broker now, or null between brokers. */
        String current() {
            URI uri = failover.getConnectedTransportURI();
            return uri == null ? null : uri.toString();
        }

        /** Record the broker if it is another than the last one seen; returns true if so. */
        synchronized boolean sample(long now) {
            String uri = current();
            if (uri == null) {
                return false;
            }
            if (!brokers.isEmpty() && brokers.get(brokers.size() - 1).equals(uri)) {
                return false;
            }
            brokers.add(uri);
            times.add(now);
            return true;
        }

        synchronized String line() {
            StringBuilder out = new StringBuilder("client ").append(id).append(' ');
            String uri = current();
            out.append(uri == null ? "-" : uri).append(' ');
            for (int i = 0; i < brokers.size(); i++) {
                if (i > 0) {
                    out.append(',');
                }
                out.append(times.get(i)).append('=').append(brokers.get(i));
            }
            if (brokers.isEmpty()) {
                out.append('-');
            }
            return out.toString();
        }
    }

    private final List<Client> clients = new CopyOnWriteArrayList<>();
    private volatile long lastChange = 0;

    private void sampleForever() {
        while (true) {
            long now = System.nanoTime();
            for (Client client : clients) {
                if (client.sample(now)) {
                    lastChange = now;
                }
            }
            try {
                Thread.sleep(SAMPLE_MILLIS);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private String open(String uri, String[] ids) throws Exception {
        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(uri);
        for (String id : ids) {
            ActiveMQConnection connection = (ActiveMQConnection) factory.createConnection();
            connection.setClientID(id);
            Client client = new Client(id, connection);
            // start() sends the ConnectionInfo, which waits until the failover transport is
            // connected: on return the client is on a broker.
            connection.start();
            client.sample(System.nanoTime());
            clients.add(client);
        }
        return "ok " + ids.length;
    }

    private String status() {
        int connected = 0;
        for (Client client : clients) {
            if (client.current() != null) {
                connected++;
            }
        }
        return "ok " + System.nanoTime() + " " + lastChange + " " + connected + " " + clients.size();
    }

    private void closeAll() {
        for (Client client : clients) {
            try {
                client.connection.close();
            } catch (Exception e) {
                System.err.println("closing " + client.id + " failed: " + e);
            }
        }
        clients.clear();
        lastChange = 0;
    }

    private void serve(BufferedReader in, PrintStream out) throws Exception {
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            try {
                switch (words[0]) {
                    case "open":
                        if (words.length < 3) {
                            throw new IllegalArgumentException("open <uri> <client-id>...");
                        }
                        String[] ids = new String[words.length - 2];
                        System.arraycopy(words, 2, ids, 0, ids.length);
                        out.println(open(words[1], ids));
                        break;
                    case "report":
                        for (Client client : clients) {
                            out.println(client.line());
                        }
                        out.println("ok " + clients.size());
                        break;
                    case "status":
                        out.println(status());
                        break;
                    case "close":
                        closeAll();
                        out.println("ok");
                        break;
                    case "quit":
                        closeAll();
                        out.println("ok");
                        out.flush();
                        return;
                    default:
                        out.println("error unknown command " + words[0]);
                }
            } catch (Exception e) {
                out.println("error " + String.valueOf(e).replace('\n', ' '));
            }
            out.flush();
        }
        closeAll();
    }

    public static void main(String[] args) throws Exception {
        RebalanceClients program = new RebalanceClients();
        Thread sampler = new Thread(program::sampleForever, "sampler");
        sampler.setDaemon(true);
        sampler.start();
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        out.println("ok ready");
        out.flush();
        program.serve(in, out);
        // The failover transports' threads are not daemons: leave without waiting for them.
        System.exit(0);
    }
}
