"""The protocol server's ordering contract on a real socket: responses in request order, deferred responses
pipelined among produce requests, every other request held until the deferred answers before it are written."""

import asyncio
import struct

import uvloop

from odradek.network.server import Deferred, KafkaServer

PRODUCE, FETCH = 0, 1


def frame(api_key: int, name: bytes) -> bytes:
    body = struct.pack(">hhi", api_key, 0, 0) + name
    return struct.pack(">i", len(body)) + body


async def read_response(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


class Recorder:
    """A dispatcher that answers each request with its name; names starting with "wait" get a Deferred
    answer that the test releases."""

    def __init__(self):
        self.handled: list[bytes] = []
        self.releases: dict[bytes, asyncio.Future] = {}

    def __call__(self, connection, request: bytearray):
        name = bytes(request[8:])
        self.handled.append(name)
        if name.startswith(b"wait"):
            release = asyncio.get_running_loop().create_future()
            self.releases[name] = release

            async def answer():
                await release
                return [name]
            return Deferred(answer())
        return [name]


async def serving(dispatch) -> KafkaServer:
    server = KafkaServer("127.0.0.1", 0, dispatch, max_request_size=1 << 20)
    await server.start()
    return server


async def wait_until(condition, what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def test_produce_requests_go_on_while_a_deferred_answer_waits_and_answers_keep_request_order():
    async def scenario():
        recorder = Recorder()
        server = await serving(recorder)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(frame(PRODUCE, b"wait-1") + frame(PRODUCE, b"now-2") + frame(PRODUCE, b"wait-3")
                         + frame(PRODUCE, b"now-4"))
            await writer.drain()
            await wait_until(lambda: len(recorder.handled) == 4, "all four produce requests handled")
            early = asyncio.ensure_future(read_response(reader))
            await asyncio.sleep(0.05)
            assert not early.done(), "a response overtook the deferred answer before it"
            recorder.releases[b"wait-3"].set_result(None)  # the later one first: still nothing may be written
            await asyncio.sleep(0.05)
            assert not early.done()
            recorder.releases[b"wait-1"].set_result(None)
            answers = [await early] + [await read_response(reader) for _ in range(3)]
            assert answers == [b"wait-1", b"now-2", b"wait-3", b"now-4"]
        finally:
            writer.close()
            await server.close()

    uvloop.run(scenario())


def test_other_requests_wait_until_the_deferred_answers_before_them_are_written():
    async def scenario():
        recorder = Recorder()
        server = await serving(recorder)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(frame(PRODUCE, b"wait-1") + frame(FETCH, b"fetch-2") + frame(PRODUCE, b"now-3"))
            await writer.drain()
            await wait_until(lambda: recorder.handled, "the produce request handled")
            await asyncio.sleep(0.05)
            assert recorder.handled == [b"wait-1"], "a fetch was handled while a produce answer was pending"
            recorder.releases[b"wait-1"].set_result(None)
            answers = [await read_response(reader) for _ in range(3)]
            assert answers == [b"wait-1", b"fetch-2", b"now-3"]
            assert recorder.handled == [b"wait-1", b"fetch-2", b"now-3"]
        finally:
            writer.close()
            await server.close()

    uvloop.run(scenario())


def test_a_deferred_answer_that_fails_closes_the_connection():
    async def scenario():
        def dispatch(connection, request):
            async def answer():
                raise RuntimeError("the handler failed")
            return Deferred(answer())

        server = await serving(dispatch)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(frame(PRODUCE, b"wait-1"))
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 30) == b""  # closed, nothing written
        finally:
            writer.close()
            await server.close()

    uvloop.run(scenario())
