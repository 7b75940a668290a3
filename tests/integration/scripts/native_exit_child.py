"""Leave native Kafka consumers behind and exit: pooled ones (4) and one held in a global.

``python native_exit_child.py <bootstrap> <mode>``; mode ``atexit``: jetkafka's exit hook closes
the pooled consumers; ``finalize``: the hook is unregistered, so every consumer is still open
when the interpreter finalizes. librdkafka's ``generic`` debug log (stderr) shows which
consumers were destroyed ("Terminating instance").
"""

from __future__ import annotations

import atexit
import sys

from jetspark.datasources.kafka import read as kafka_read
from jetspark.datasources.kafka.native import NativeConsumer

bootstrap, mode = sys.argv[1], sys.argv[2]
base = {"bootstrap.servers": bootstrap, "group.id": "native-exit", "debug": "generic",
        "reconnect.backoff.ms": "10", "reconnect.backoff.max.ms": "100"}
for n in range(4):
    with kafka_read._pooled_consumer({**base, "client.id": f"pooled-{n}"}, True) as consumer:
        assert isinstance(consumer, NativeConsumer)
        consumer.assign("native_exit", 0, 0)
        chunk = consumer.read(10, 100, 300)  # the broker refuses connections: nothing comes
        assert chunk.rows == 0
assert len(kafka_read._POOL) == 4
HELD = NativeConsumer(kafka_read.consumer_conf({**base, "client.id": "held"}))
HELD.assign("native_exit", 0, 0)
if mode == "finalize":
    atexit.unregister(kafka_read.close_pooled_consumers)
print("exiting", flush=True)
