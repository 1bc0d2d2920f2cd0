/*
 * ActiveMQ Java producers (the failover: transport of activemq-client) driven over stdin/stdout
 * by benchmarks/bench_masterslave.py, so that our failover is timed against the Java client on
 * the same brokers, through the same kills, in the same run.
 *
 * Each producer has its own connection and a thread that sends persistent messages in a loop;
 * a persistent send of activemq-client is synchronous (it returns once the broker confirmed
 * it), so a completed send() is a confirmed send. Times are System.nanoTime(), which on Linux
 * is CLOCK_MONOTONIC: the clock of Python's time.monotonic().
 *
 * Commands (one a line); every reply ends with a line "ok ..." or "error <reason>":
 *   open <name> <failover-uri> <queue>   connect and start sending (returns after the first send)
 *   mark <nanos>                         report each producer's first send completed after nanos
 *   wait                                 lines "first <name> <nanos>" once every producer has one
 *   quit                                 stop every producer, close, exit
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.MessageProducer;
import javax.jms.Session;

import org.apache.activemq.ActiveMQConnectionFactory;

public final class FailoverProducers {

    /** A pause after each send, as the Python producers make, so four producers leave the
     *  brokers' start-up some CPU; the send in flight at a kill is the one that fails over. */
    private static final long PACE_MILLIS = 5;

    /** One producer: its connection, its sending thread and what the last mark found. */
    private static final class Producer implements Runnable {
        final String name;
        final Connection connection;
        final Session session;
        final MessageProducer producer;
        final CountDownLatch firstSend = new CountDownLatch(1);
        volatile boolean running = true;
        volatile long mark = Long.MAX_VALUE;
        volatile long firstAfterMark = 0;
        volatile Exception failure;

        Producer(String name, String uri, String queue) throws Exception {
            this.name = name;
            this.connection = new ActiveMQConnectionFactory(uri).createConnection();
            this.connection.start();
            this.session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            this.producer = session.createProducer(session.createQueue(queue));
            this.producer.setDeliveryMode(DeliveryMode.PERSISTENT);
        }

        @Override
        public void run() {
            long n = 0;
            try {
                while (running) {
                    producer.send(session.createTextMessage(name + "-" + n++));
                    long done = System.nanoTime();
                    firstSend.countDown();
                    if (done > mark && firstAfterMark == 0) {
                        firstAfterMark = done;
                    }
                    Thread.sleep(PACE_MILLIS);
                }
            } catch (Exception e) {
                if (running) {
                    failure = e;
                }
            }
        }
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<Producer> producers = new CopyOnWriteArrayList<>();
        out.println("ok ready");
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.trim().split(" ");
            try {
                switch (parts[0]) {
                    case "open": {
                        Producer p = new Producer(parts[1], parts[2], parts[3]);
                        Thread t = new Thread(p, "producer-" + parts[1]);
                        t.setDaemon(true);
                        t.start();
                        if (!p.firstSend.await(60, TimeUnit.SECONDS)) {
                            throw new IllegalStateException("no first send within 60 s");
                        }
                        producers.add(p);
                        out.println("ok opened " + parts[1]);
                        break;
                    }
                    case "mark": {
                        long mark = Long.parseLong(parts[1]);
                        for (Producer p : producers) {
                            p.firstAfterMark = 0;
                            p.mark = mark;
                        }
                        out.println("ok marked");
                        break;
                    }
                    case "wait": {
                        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
                        for (Producer p : producers) {
                            while (p.firstAfterMark == 0 && p.failure == null && System.nanoTime() < deadline) {
                                Thread.sleep(1); // a poll of a volatile; the deadline bounds it
                            }
                            if (p.failure != null) {
                                throw p.failure;
                            }
                            out.println("first " + p.name + " " + p.firstAfterMark);
                        }
                        out.println("ok waited");
                        break;
                    }
                    case "quit": {
                        for (Producer p : producers) {
                            p.running = false;
                            p.connection.close();
                        }
                        out.println("ok bye");
                        return;
                    }
                    default:
                        out.println("error unknown command " + parts[0]);
                }
            } catch (Exception e) {
                out.println("error " + e.toString().replace('\n', ' '));
            }
        }
    }
}
