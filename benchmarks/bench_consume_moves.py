"""Consumers that move on an ActiveMQ network of brokers: left behind, lost, duplicated.

Run: ``python benchmarks/bench_consume_moves.py [--runs 2] [--rate 2000] [--seconds 8]
[--consumers 4] [--scenario priority|join|both]``

Three ActiveMQ Classic brokers (harness, loopback, fast-start JVM flags) in a full mesh with
ActiveMQ's default bridges (``networkTTL`` 1, no ``replayWhenNoConsumers``); a producer of ours
on broker 2 sends ``rate`` x ``seconds`` ids, each confirmed. Scenarios (``_consume_moves``):

* ``priority``: one consumer on ``failover:(b0,b1)?priorityBackup=true``; b0 SIGKILLed after a
  quarter of the run, restarted after another quarter; priority backup moves the consumer home.
* ``join``: ``--consumers`` consumers with ``rebalance=true`` on all three while b2 is down,
  half on b1 and half on b0; b2 starts after a third of the run and the ones on b1 (whose
  rendezvous home b2 is) move there, leaving b1 without a consumer of the queue.

Each run is made with the old behaviour (``consumer.drainOnMove=false``: the old session
closes at once) and the new one (``true``: the broker left is drained until quiet) on the same
brokers, one after the other. Printed per run: ids lost (sent and confirmed, never received
nor left on a broker), duplicates received, and messages left on each broker once the
producer stopped and the moves settled (drained with a plain STOMP consumer after the
consumers closed), with the consumers' planned moves and drains (broker port, messages
delivered by the drain, its length).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import brokers, log
from benchmarks._consume_moves import Outcome, run_join, run_priority_return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--scenario", choices=("priority", "join", "both"), default="both")
    args = parser.parse_args(argv)
    outcomes: list[Outcome] = []
    with brokers(3, network=True, label="moves", full_jit=False) as cluster:
        for run in range(args.runs):
            for drain in (False, True):
                if args.scenario in ("priority", "both"):
                    log(f"run {run + 1}: priority return, drainOnMove={drain}")
                    outcome = run_priority_return(
                        cluster, drain=drain, rate=args.rate, seconds=args.seconds
                    )
                    outcomes.append(outcome)
                    print(outcome.line(), flush=True)
                if args.scenario in ("join", "both"):
                    log(f"run {run + 1}: join, drainOnMove={drain}")
                    outcome = run_join(
                        cluster,
                        drain=drain,
                        rate=args.rate,
                        seconds=args.seconds,
                        consumers=args.consumers,
                    )
                    outcomes.append(outcome)
                    print(outcome.line(), flush=True)
    print()
    print("scenario  drainOnMove  runs  left (total)  lost  duplicates")
    for scenario in ("priority", "join"):
        for drain in (False, True):
            mine = [o for o in outcomes if o.scenario == scenario and o.drain == drain]
            if mine:
                print(
                    f"{scenario:9} {str(drain).lower():11} {len(mine):5} "
                    f"{sum(o.left_total for o in mine):13} {sum(o.lost for o in mine):5} "
                    f"{sum(o.duplicates for o in mine):11}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
