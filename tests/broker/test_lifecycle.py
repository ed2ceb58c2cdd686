"""A starting broker's registration and first heartbeats (broker/lifecycle.py) against a controller that is slow
to answer: it waits for the controller instead of exiting."""

import asyncio
from types import SimpleNamespace

import pytest

from odradek.broker.lifecycle import BROKER_HEARTBEAT, BROKER_REGISTRATION, BrokerLifecycle
from odradek.protocol.errors import ErrorCode, KafkaError


class Config(dict):
    advertised_listeners = []

    def security_protocols(self):
        return {}


class Controller:
    """Answers registration at once; heartbeats with the scripted answers, an exception raised as the channel
    raises it."""

    def __init__(self, heartbeats):
        self.heartbeats = list(heartbeats)
        self.asked = []

    async def request(self, api_key, api_version, body, timeout_s=30.0):
        self.asked.append(api_key)
        if api_key == BROKER_REGISTRATION:
            return {"error_code": ErrorCode.NONE, "broker_epoch": 7}
        answer = self.heartbeats.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def lifecycle(controller: Controller) -> BrokerLifecycle:
    node = SimpleNamespace(node_id=1, cluster_id="c", controller_channel=controller,
                           quorum=SimpleNamespace(applied=1),
                           config=Config({"broker.heartbeat.interval.ms": 2000, "broker.rack": None}))
    return BrokerLifecycle(node)


def fenced(is_fenced: bool) -> dict:
    return {"error_code": ErrorCode.NONE, "is_fenced": is_fenced, "should_shut_down": False}


def test_a_controller_that_does_not_answer_in_time_is_asked_again_until_the_broker_is_unfenced():
    controller = Controller([KafkaError(ErrorCode.NOT_CONTROLLER, "no active controller answered in time"),
                             TimeoutError(), ConnectionError(), fenced(True), fenced(False)])
    broker = lifecycle(controller)

    async def start():
        await broker.start()
        broker._task.cancel()

    asyncio.run(start())
    assert not broker.fenced and broker.epoch == 7
    assert controller.asked == [BROKER_REGISTRATION] + [BROKER_HEARTBEAT] * 5


def test_a_heartbeat_the_controller_refuses_still_fails_the_start():
    broker = lifecycle(Controller([fenced(True), {"error_code": ErrorCode.INVALID_REQUEST}]))
    with pytest.raises(KafkaError, match="heartbeat refused"):
        asyncio.run(broker.start())
