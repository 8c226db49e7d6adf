"""The services' flow control keeps events delivered while the flow runs (sinks.faust_support).

At the end of a table recovery Faust calls ``flow_control.resume()`` on a flow that already runs;
mode's ``FlowControlEvent`` then empties every stream queue, and an event delivered in that moment
was lost for good (see ``KeepDeliveredFlowControl``). No broker needed: the queues are the ones
Faust's streams use (``FlowControlQueue(clear_on_resume=True)``).
"""

from __future__ import annotations

from mode.utils.queues import FlowControlEvent, FlowControlQueue

from sinks import cases, enricher
from sinks.faust_support import KeepDeliveredFlowControl


def _queue_with_an_event(flow_control: FlowControlEvent) -> FlowControlQueue:
    queue = FlowControlQueue(flow_control=flow_control, clear_on_resume=True)
    flow_control.resume()                       # the recovery starts the flow
    queue.put_nowait("event delivered before the recovery ended")
    return queue


def test_resuming_a_running_flow_keeps_the_delivered_events():
    queue = _queue_with_an_event(KeepDeliveredFlowControl())
    queue._flow_control.resume()                 # the end of the recovery resumes it again
    assert queue.qsize() == 1


def test_mode_s_own_flow_control_drops_them():
    """What the subclass is for: if mode ever stops emptying the queues here, it can go."""
    queue = _queue_with_an_event(FlowControlEvent())
    queue._flow_control.resume()
    assert queue.qsize() == 0


def test_resuming_after_a_suspension_still_empties_the_queues():
    """A rebalance suspends the flow: what was fetched before it is dropped and re-fetched from the
    committed offsets, as Faust intends."""
    flow_control = KeepDeliveredFlowControl()
    queue = _queue_with_an_event(flow_control)
    flow_control.suspend()
    assert not flow_control.is_active()
    flow_control.resume()
    assert flow_control.is_active() and queue.qsize() == 0


def test_both_services_use_it():
    assert isinstance(cases.app.flow_control, KeepDeliveredFlowControl)
    assert isinstance(enricher.app.flow_control, KeepDeliveredFlowControl)
