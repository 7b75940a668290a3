"""Leave native Kafka consumers behind and exit: pooled ones (4) and one held in a global.

``python native_exit_child.py <bootstrap> <mode>``; mode ``atexit``: jetkafka's exit hook closes
the pooled consumers; ``finalize``: the hook is unregistered, so every consumer is still open
when the interpreter finalizes. librdkafka's ``generic`` debug log (stderr) shows which
consumers were destroyed ("Terminating instance", named by client.id); a ``control``
consumer closed before exit shows that the log reports a destroy.
"""

from __future__ import annotations

import atexit
import sys

from jetspark.datasources.kafka import consumers
from jetspark.datasources.kafka.native import NativeConsumer

bootstrap, mode = sys.argv[1], sys.argv[2]
base = {"bootstrap.servers": bootstrap, "group.id": "native-exit", "debug": "generic",
        "reconnect.backoff.ms": "10", "reconnect.backoff.max.ms": "100"}
for n in range(4):
    with consumers.pooled_consumer({**base, "client.id": f"pooled-{n}"}, True) as consumer:
        assert isinstance(consumer, NativeConsumer)
        consumer.assign("native_exit", 0, 0)
        chunk = consumer.read(10, 100, 300)  # the broker refuses connections: nothing comes
        assert chunk.rows == 0
assert len(consumers._POOL) == 4
HELD = NativeConsumer(consumers.consumer_conf({**base, "client.id": "held"}))
HELD.assign("native_exit", 0, 0)
control = NativeConsumer(consumers.consumer_conf({**base, "client.id": "control"}))
control.close()  # destroyed before exit in both modes: shows how the log reports a destroy
if mode == "finalize":
    atexit.unregister(consumers.close_pooled_consumers)
print("exiting", flush=True)
