/*
 * The ActiveMQ Java client's failover: transport as a producer, driven over stdin/stdout by
 * benchmarks/bench_failover.py, so that our failover time is measured against the Java client
 * on the same brokers, in the same run, with the same kills.
 *
 * One ActiveMQConnection on the given failover: URI (its defaults unless the URI sets options),
 * one session (AUTO_ACKNOWLEDGE, not transacted) and one producer, PERSISTENT: ActiveMQ sends a
 * persistent message synchronously, so send() returns once the broker stored it (the same
 * confirmation as a STOMP receipt). The failover transport replays a send in flight at a loss.
 *
 * Commands (one a line, fields separated by tabs); every reply is one line "ok ..." or
 * "error <reason>":
 *   open <failover-uri>          connect (started), reply "ok"
 *   send <queue> <id>            send one persistent BytesMessage with string property
 *                                bench-id=<id> to queue <queue>; reply "ok <broker-uri>" with
 *                                the broker the transport is connected to after the send
 *   quit                         close and exit
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import javax.jms.BytesMessage;
import javax.jms.DeliveryMode;
import javax.jms.MessageProducer;
import javax.jms.Session;

import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.transport.failover.FailoverTransport;

public final class FailoverProducer {

    private static final byte[] BODY = new byte[128];

    /**
     * The broker the transport is on. Right after a send that went through during a failover
     * the transport may not have published its new URI yet: wait for it (1 s at most).
     */
    private static URI connectedBroker(FailoverTransport failover) throws InterruptedException {
        if (failover == null) {
            return null;
        }
        URI now = failover.getConnectedTransportURI();
        for (int i = 0; now == null && i < 1000; i++) {
            Thread.sleep(1);
            now = failover.getConnectedTransportURI();
        }
        return now;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        ActiveMQConnection connection = null;
        FailoverTransport failover = null;
        Session session = null;
        MessageProducer producer = null;
        Map<String, javax.jms.Queue> queues = new HashMap<>();
        java.util.Arrays.fill(BODY, (byte) 'x');
        out.println("ok ready");
        String line;
        while ((line = in.readLine()) != null) {
            // Tab-separated: a queue name may hold spaces.
            String[] parts = line.split("\t");
            try {
                switch (parts[0]) {
                    case "open":
                        connection = (ActiveMQConnection)
                                new ActiveMQConnectionFactory(parts[1]).createConnection();
                        connection.start();
                        failover = connection.getTransport().narrow(FailoverTransport.class);
                        session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        producer = session.createProducer(null);
                        producer.setDeliveryMode(DeliveryMode.PERSISTENT);
                        out.println("ok");
                        break;
                    case "send":
                        javax.jms.Queue queue = queues.get(parts[1]);
                        if (queue == null) {
                            queue = session.createQueue(parts[1]);
                            queues.put(parts[1], queue);
                        }
                        BytesMessage message = session.createBytesMessage();
                        message.writeBytes(BODY);
                        message.setStringProperty("bench-id", parts[2]);
                        producer.send(queue, message);
                        URI now = connectedBroker(failover);
                        out.println("ok " + (now == null ? "-" : now.toString()));
                        break;
                    case "quit":
                        if (connection != null) {
                            connection.close();
                        }
                        out.println("ok bye");
                        return;
                    default:
                        out.println("error unknown command " + parts[0]);
                }
            } catch (Exception e) {
                out.println("error " + e.toString().replace('\n', ' '));
            }
        }
    }
}
