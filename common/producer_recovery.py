"""An idempotent kafka-python producer that sends again after a delivery expired in a broker outage.

kafka-python 3.0.x (3.0.12, the newest release, included): when a batch that was already retried
expires (``delivery_timeout_ms``), the sender resets the producer id (``reset_producer_id``: its
sequence numbers can no longer be trusted) but leaves the transaction manager READY, and only an
UNINITIALIZED manager asks the broker for a new id. The sender then waits for an id forever: it
drains no batch, expires none, fails no future, and the buffer fills until ``flush`` or ``close`` times
out. A broker stopped, or paused (SIGSTOP), for longer than the delivery timeout does it, which is what
the simulator met in ``make chaos`` and ``make e2e-cluster``. Kafka's Java client moves the manager back
to UNINITIALIZED on this reset (KAFKA-7737); ``install`` does the same, so the next loop of the sender
asks for a new id and sends what is buffered. The expired records are failed (their errbacks say so):
they may or may not be in the log, and are never sent again.
``tests/integration/test_producers.py`` pauses a broker past the delivery timeout and checks both.
"""

from __future__ import annotations

from functools import wraps


def install() -> None:
    """Patch kafka-python's TransactionManager once per process (idempotent producers only)."""
    from kafka.producer.transaction_manager import TransactionManager, TransactionState

    reset = TransactionManager.reset_producer_id
    if getattr(reset, "asks_for_a_new_id", False):
        return

    @wraps(reset)
    def reset_producer_id(self):
        reset(self)
        with self._lock:
            self._current_state = TransactionState.UNINITIALIZED   # init_producer_id() acts from here

    reset_producer_id.asks_for_a_new_id = True
    TransactionManager.reset_producer_id = reset_producer_id
