// The ActiveMQ Java client's multicast discovery agent, timed: what a Java client on
// discovery:(multicast://default) hears, and when (System.nanoTime(): CLOCK_MONOTONIC on Linux,
// the clock of Python's time.monotonic()).
//
// Usage: java -cp <activemq client jars>:<classes> DiscoveryWatch [multicast://default]
// Prints "ready", then one line per event: "added <nanos> <service>" / "removed <nanos> <service>".
// Ends when its standard input closes.

import java.net.URI;

import org.apache.activemq.command.DiscoveryEvent;
import org.apache.activemq.transport.discovery.DiscoveryListener;
import org.apache.activemq.transport.discovery.multicast.MulticastDiscoveryAgent;

public final class DiscoveryWatch {
    public static void main(String[] args) throws Exception {
        MulticastDiscoveryAgent agent = new MulticastDiscoveryAgent();
        agent.setDiscoveryURI(new URI(args.length > 0 ? args[0] : "multicast://default"));
        agent.setDiscoveryListener(new DiscoveryListener() {
            @Override
            public void onServiceAdd(DiscoveryEvent event) {
                say("added " + System.nanoTime() + " " + event.getServiceName());
            }

            @Override
            public void onServiceRemove(DiscoveryEvent event) {
                say("removed " + System.nanoTime() + " " + event.getServiceName());
            }
        });
        agent.start();
        say("ready");
        while (System.in.read() != -1) {
            // nothing to do: the agent's own threads listen; stdin's end stops us
        }
        agent.stop();
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
