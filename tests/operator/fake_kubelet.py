"""A fake kubelet for tests: starts a process for each Pod of a namespace, reports it Running and, once its
runtime says so, Ready; stops it when the Pod is deleted (SIGTERM, then SIGKILL after a grace period), and starts
it again after a back-off if it exits by itself or its init containers fail (restartPolicy Always), reported as a
real kubelet does meanwhile (not ready, waiting in CrashLoopBackOff). A Pod recreated under the same name
starts only once the old one's process has stopped, as a StatefulSet-like Pod does on a real kubelet.

What a Pod runs is the runtime's business: `SleepRuntime` runs `sleep` (the operator's bookkeeping alone),
tests/operator/node_runtime.py's `NodeRuntime` runs the real `odradek server` from the Pod's own command, volumes
and configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable
from typing import Protocol

from odradek.operator.kube import PODS, Kube, KubeError

log = logging.getLogger(__name__)

STOP_GRACE_S = 30.0
RESTART_BACKOFF_S = 1.0


class PodRuntime(Protocol):
    async def start(self, pod: dict) -> asyncio.subprocess.Process:
        """Start the Pod's main process (after its init containers, if the runtime runs them)."""

    async def wait_ready(self, pod: dict, proc: asyncio.subprocess.Process) -> None:
        """Return once the Pod's readiness probe would pass."""


class SleepRuntime:
    """Every Pod runs `sleep 1000`, ready at once."""

    async def start(self, pod: dict) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec("sleep", "1000", stdin=asyncio.subprocess.DEVNULL)

    async def wait_ready(self, pod: dict, proc: asyncio.subprocess.Process) -> None:
        return None


class FakeKubelet:
    """`procs`: pod name -> its running process; `history`: ("started" | "ready" | "stopped" | "exited" |
    "failed to start", pod name)."""

    def __init__(self, kube: Kube, namespace: str, runtime: PodRuntime | None = None) -> None:
        self.kube, self.namespace = kube, namespace
        self.runtime = runtime or SleepRuntime()
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.history: list[tuple[str, str]] = []
        self._changed = asyncio.Condition()
        self._task: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._starting: set[str] = set()
        self._stopping: dict[str, asyncio.Task] = {}
        self._seen: set[str] = set()  # pod uids started
        self._deleted: set[str] = set()  # pod uids deleted: their processes are not started again

    async def __aenter__(self) -> FakeKubelet:
        self._task = asyncio.create_task(self._run(), name="fake-kubelet")
        return self

    async def __aexit__(self, *exc_info) -> None:
        assert self._task is not None
        for task in [self._task, *self._tasks]:
            task.cancel()
        for task in [self._task, *self._tasks]:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.gather(*(self._stop(name) for name in list(self.procs)))

    async def wait_for(self, predicate: Callable[[FakeKubelet], bool], timeout: float = 30) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: predicate(self))

    def count(self, what: str, name: str | None = None) -> int:
        return sum(1 for event, pod in self.history if event == what and (name is None or pod == name))

    async def _changed_now(self, what: str, name: str) -> None:
        self.history.append((what, name))
        async with self._changed:
            self._changed.notify_all()

    async def _run(self) -> None:
        while True:  # watch again after a disconnect: the emulator replays every Pod as ADDED
            try:
                async with contextlib.aclosing(self.kube.watch(PODS, self.namespace)) as events:
                    async for type_, pod in events:
                        await self._handle(type_, pod)
            except (KubeError, OSError) as e:
                log.warning("pod watch failed: %s", e)
            await asyncio.sleep(0.1)

    async def _handle(self, type_: str, pod: dict) -> None:
        name = pod["metadata"]["name"]
        if type_ == "DELETED" or pod["metadata"].get("deletionTimestamp"):
            self._deleted.add(pod["metadata"].get("uid"))
            if name not in self._stopping:
                self._stopping[name] = self._spawn(self._stop(name))
        elif pod["metadata"].get("uid") not in self._seen and not (pod.get("status") or {}).get("phase"):
            self._seen.add(pod["metadata"].get("uid"))
            self._spawn(self._start(name, pod))

    def _spawn(self, work) -> asyncio.Task:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _start(self, name: str, pod: dict) -> None:
        stopping = self._stopping.get(name)
        if stopping is not None:  # the old Pod of that name: its process first goes
            await stopping
        self._starting.add(name)
        try:
            proc = await self.runtime.start(pod)
        except Exception as e:  # an init container failed: Pending, tried again after a back-off
            log.warning("pod %s failed to start: %s", name, e)
            self._starting.discard(name)
            with contextlib.suppress(KubeError):
                await self._set_status(name, "Pending", ready=False, pid=None, waiting="CrashLoopBackOff")
            await self._changed_now("failed to start", name)
            await asyncio.sleep(RESTART_BACKOFF_S)
            if pod["metadata"].get("uid") not in self._deleted:
                await self._start(name, pod)
            return
        self._starting.discard(name)
        self.procs[name] = proc
        self._spawn(self._reap(name, pod, proc))
        await self._set_status(name, "Running", ready=False, pid=proc.pid)
        await self._changed_now("started", name)
        try:
            await self.runtime.wait_ready(pod, proc)
        except Exception as e:
            log.warning("pod %s never got ready: %s", name, e)
            return
        if self.procs.get(name) is proc and proc.returncode is None:
            await self._set_status(name, "Running", ready=True, pid=proc.pid)
            await self._changed_now("ready", name)

    async def _reap(self, name: str, pod: dict, proc: asyncio.subprocess.Process) -> None:
        await proc.wait()
        if self.procs.get(name) is proc:  # it exited by itself: not stopped here
            del self.procs[name]
            with contextlib.suppress(KubeError):
                await self._set_status(name, "Running", ready=False, pid=None, waiting="CrashLoopBackOff")
            await self._changed_now("exited", name)
            await asyncio.sleep(RESTART_BACKOFF_S)
            if pod["metadata"].get("uid") not in self._deleted:
                await self._start(name, pod)

    async def _stop(self, name: str) -> None:
        try:
            await self._stop_process(name)
        finally:
            self._stopping.pop(name, None)

    async def _stop_process(self, name: str) -> None:
        while name in self._starting:  # starting (or restarting): stop what it starts
            await asyncio.sleep(0.05)
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        try:
            if proc.returncode is None:
                proc.terminate()  # SIGTERM, as the kubelet does: a node's controlled shutdown
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(STOP_GRACE_S):
                        await proc.wait()
        finally:  # after the grace period, or when the kubelet itself goes: no process outlives its Pod
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await self._changed_now("stopped", name)

    async def _set_status(self, name: str, phase: str, *, ready: bool, pid: int | None,
                          waiting: str | None = None) -> None:
        """What a kubelet reports: `waiting` is why a container waits to be started (again), e.g. a crash loop
        (phase Running, or Pending when an init container fails)."""
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        flag = "True" if ready else "False"
        state = {"waiting": {"reason": waiting}} if waiting else {"running": {"startedAt": now}}
        await self.kube.merge_patch(PODS, self.namespace, name, {"status": {
            "phase": phase, "podIP": "127.0.0.1", "startTime": now,
            "conditions": [{"type": "Ready", "status": flag, "lastTransitionTime": now},
                           {"type": "ContainersReady", "status": flag, "lastTransitionTime": now}],
            "containerStatuses": [{"name": "odradek", "ready": ready, "restartCount": 0, "state": state,
                                   "image": "odradek", "imageID": "", "containerID": f"pid://{pid}"}]}},
            subresource="status")
