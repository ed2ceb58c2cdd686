"""The operator under test: kopf running `odradek operator`'s handlers on its own thread and event loop, as in
production, against kmock's Kubernetes API emulator, with a fake kubelet serving the Pods from the test's loop.
Every wait is on an event (a watch, the kubelet's condition), bounded by a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import kmock

from odradek.operator.cluster_handler import OWNED
from odradek.operator.connection import AddressMap
from odradek.operator.kube import CLUSTERS, Connection, Kube, KubeError, Resource
from odradek.operator.main import run_operator
from odradek.operator.render import CLUSTER_LABEL
from tests.operator.fake_kubelet import FakeKubelet, PodRuntime
from tests.operator.kube_emulator import KubeEmulator, kube_emulator

NS = "odradek-test"
NAME = "my-cluster"
DEADLINE_S = 30.0
RECONCILE_INTERVAL_S = 0.3  # the operator's timer, fast for tests (10 s in production)
RECONCILE_IDLE_S = 0.1


class ClusterWatch:
    """The latest state of the test's OdradekCluster (None once deleted), kept from a watch started before it is
    created, so that a wait sees every state it ends in."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.latest: dict | None = None
        self.deleted = False
        self._changed = asyncio.Condition()
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> ClusterWatch:
        self._task = asyncio.create_task(self._run(), name="cluster-watch")
        return self

    async def __aexit__(self, *exc_info) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        async with contextlib.aclosing(self.kube.watch(CLUSTERS, NS)) as events:
            async for type_, obj in events:
                if obj["metadata"]["name"] == NAME:
                    self.latest, self.deleted = (None, True) if type_ == "DELETED" else (obj, False)
                    async with self._changed:
                        self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[dict], bool], timeout: float = DEADLINE_S) -> dict:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: self.latest is not None and predicate(self.latest))
        return self.latest

    async def wait_deleted(self) -> None:
        async with asyncio.timeout(DEADLINE_S), self._changed:
            await self._changed.wait_for(lambda: self.deleted)


@dataclass
class Harness:
    emulator: KubeEmulator
    kube: Kube
    kubelet: FakeKubelet
    cluster: ClusterWatch
    operator: OperatorThread

    async def objects(self) -> dict[tuple[str, str], dict]:
        """Every object labelled for the cluster, by (kind, name)."""
        found = {}
        for kind in OWNED:
            for obj in await self.kube.list(kind, NS, {CLUSTER_LABEL: NAME}):
                found[obj["kind"], obj["metadata"]["name"]] = obj
        return found

    async def patch_spec(self, spec: dict) -> None:
        await self.kube.merge_patch(CLUSTERS, NS, NAME, {"spec": spec})


class OperatorThread:
    """`odradek operator` on a thread of its own, as it runs in production on its own process's loop."""

    def __init__(self, server: str, address_map: AddressMap | None) -> None:
        self.server, self.address_map = server, address_map
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        self._stop, ready = threading.Event(), threading.Event()
        # a daemon: an operator that does not stop fails its test, and must not also hang pytest's exit
        self._thread = threading.Thread(name="odradek-operator", target=run_operator, args=(NS, self.server),
                                        daemon=True,
                                        kwargs={"stop_flag": self._stop, "ready_flag": ready,
                                                "reconcile_interval": RECONCILE_INTERVAL_S,
                                                "reconcile_idle": RECONCILE_IDLE_S, "address_map": self.address_map})
        self._thread.start()
        async with asyncio.timeout(DEADLINE_S):
            await asyncio.to_thread(ready.wait)

    async def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        await asyncio.to_thread(self._thread.join, DEADLINE_S)
        assert not self._thread.is_alive(), "the operator did not stop"


@contextlib.asynccontextmanager
async def operator_harness(runtime: Callable[[Kube], PodRuntime] | None = None,
                           address_map: AddressMap | None = None) -> AsyncIterator[Harness]:
    """`runtime`: what the kubelet runs for a Pod (default: `sleep`); `address_map`: where the operator reaches
    the Pods' addresses (the real nodes' mapped ports)."""
    async with (kube_emulator() as emulator, Kube(Connection(server=str(emulator.url))) as kube,
                FakeKubelet(kube, NS, runtime(kube) if runtime else None) as kubelet, ClusterWatch(kube) as cluster):
        operator = OperatorThread(str(emulator.url), address_map)
        try:
            await operator.start()
            async with asyncio.timeout(DEADLINE_S):
                # kmock can miss an object created while a watch starts: create nothing before the operator, the
                # kubelet and ClusterWatch watch. The emulator's request log has no notification, hence the short polls.
                clusters = kmock.resource(f"{CLUSTERS.api_version}/{CLUSTERS.plural}")
                while not (len(emulator[kmock.action.WATCH, clusters]) >= 2  # the operator's and ClusterWatch's
                           and emulator[kmock.action.WATCH, kmock.resource("v1/pods")]):
                    await asyncio.sleep(0.02)
            yield Harness(emulator, kube, kubelet, cluster, operator)
        finally:
            await operator.stop()


def run(test: Callable[[Harness], object]) -> None:
    async def main() -> None:
        async with operator_harness() as harness:
            await test(harness)

    asyncio.run(main())


async def wait_for_resource(kube: Kube, kind: Resource, name: str, predicate: Callable[[dict], bool],
                            timeout: float = DEADLINE_S) -> dict:
    """The object once `predicate` holds for it, from a watch of its kind (which starts with every object)."""
    try:
        async with asyncio.timeout(timeout), contextlib.aclosing(kube.watch(kind, NS)) as events:
            async for type_, obj in events:
                if obj["metadata"]["name"] == name and type_ != "DELETED" and predicate(obj):
                    return obj
    except TimeoutError:
        try:
            latest = await kube.get(kind, NS, name)
        except KubeError as e:
            latest = str(e)
        raise AssertionError(f"{kind.plural}/{name}: not as wanted within {timeout}s; now {latest}") from None
    raise AssertionError(f"the watch of {kind.plural} ended")


async def wait_gone(kube: Kube, kind: Resource, name: str, timeout: float = DEADLINE_S) -> None:
    async with asyncio.timeout(timeout):
        while True:
            try:
                await kube.get(kind, NS, name)
            except KubeError as e:
                if e.status == 404:
                    return
                raise
            await asyncio.sleep(0.1)


def condition(resource: dict | None, type_: str) -> dict | None:
    return next((c for c in ((resource or {}).get("status") or {}).get("conditions") or [] if c["type"] == type_),
                None)


def ready_with(nodes: int) -> Callable[[dict], bool]:
    def check(resource: dict) -> bool:
        status = resource.get("status") or {}
        return (status.get("readyNodes") == nodes and condition(resource, "Ready") is not None
                and status.get("observedGeneration") == resource["metadata"]["generation"])
    return check
