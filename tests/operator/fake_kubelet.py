"""A fake kubelet for tests: runs a process for each Pod of a namespace, reports it Running and Ready, stops it
when the Pod is deleted (SIGTERM, then SIGKILL after a grace period), and reports it Failed if it exits itself."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable

from odradek.operator.kube import PODS, Kube, KubeError

log = logging.getLogger(__name__)

STOP_GRACE_S = 10.0


def sleep_command(pod: dict) -> list[str]:
    """Every Pod runs `sleep 1000`: a stand-in for `odradek server` (its real nodes come later)."""
    return ["sleep", "1000"]


class FakeKubelet:
    """`procs`: pod name -> its running process; `history`: ("started" | "stopped" | "exited", pod name)."""

    def __init__(self, kube: Kube, namespace: str, command_for: Callable[[dict], list[str]] = sleep_command) -> None:
        self.kube, self.namespace, self.command_for = kube, namespace, command_for
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.history: list[tuple[str, str]] = []
        self._changed = asyncio.Condition()
        self._task: asyncio.Task | None = None
        self._reapers: set[asyncio.Task] = set()

    async def __aenter__(self) -> FakeKubelet:
        self._task = asyncio.create_task(self._run(), name="fake-kubelet")
        return self

    async def __aexit__(self, *exc_info) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        for name in list(self.procs):
            await self._stop(name)

    async def wait_for(self, predicate: Callable[[FakeKubelet], bool], timeout: float = 30) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: predicate(self))

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
            await self._stop(name)
        elif name not in self.procs and not (pod.get("status") or {}).get("phase"):
            proc = await asyncio.create_subprocess_exec(*self.command_for(pod), stdin=asyncio.subprocess.DEVNULL)
            self.procs[name] = proc
            reaper = asyncio.create_task(self._reap(name, proc))
            self._reapers.add(reaper)
            reaper.add_done_callback(self._reapers.discard)
            await self._set_status(name, "Running", ready=True, pid=proc.pid)
            await self._changed_now("started", name)

    async def _reap(self, name: str, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        if self.procs.get(name) is proc:  # it exited by itself: not stopped here
            del self.procs[name]
            with contextlib.suppress(KubeError):
                await self._set_status(name, "Failed" if code else "Succeeded", ready=False, pid=None)
            await self._changed_now("exited", name)

    async def _stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        if proc.returncode is None:
            proc.terminate()  # SIGTERM, as the kubelet does: a node's controlled shutdown
            try:
                async with asyncio.timeout(STOP_GRACE_S):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        await self._changed_now("stopped", name)

    async def _set_status(self, name: str, phase: str, *, ready: bool, pid: int | None) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        flag = "True" if ready else "False"
        state = {"running": {"startedAt": now}} if ready else {"terminated": {"exitCode": 0}}
        await self.kube.merge_patch(PODS, self.namespace, name, {"status": {
            "phase": phase, "podIP": "127.0.0.1", "startTime": now,
            "conditions": [{"type": "Ready", "status": flag, "lastTransitionTime": now},
                           {"type": "ContainersReady", "status": flag, "lastTransitionTime": now}],
            "containerStatuses": [{"name": "odradek", "ready": ready, "restartCount": 0, "state": state,
                                   "image": "odradek", "imageID": "", "containerID": f"pid://{pid}"}]}},
            subresource="status")
