"""A headless Chromium driven over the DevTools protocol (aiohttp's websocket client), for the tests
that click: ``async with Browser(profile_dir) as page: await page.goto(url); await page.js("...")``.
Chromium writes its DevTools port to ``DevToolsActivePort`` in the profile; polling with a deadline."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.dashboard_dom import CHROMIUM

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"]


async def until(condition, timeout: float, what: str, interval: float = 0.2):
    """``common.waiting.wait_until`` for coroutines."""
    deadline = time.monotonic() + timeout
    while True:
        value = await condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {what}")
        await asyncio.sleep(interval)   # poll interval, bounded by the deadline above


class Browser:
    def __init__(self, profile_dir: Path):
        self.profile = profile_dir
        self.ids = itertools.count(1)

    async def __aenter__(self) -> "Browser":
        self.process = await asyncio.create_subprocess_exec(
            str(CHROMIUM), *FLAGS, f"--user-data-dir={self.profile}", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        await until(self._ready, 60, "chromium's DevTools port")
        port = int(port_file.read_text().split()[0])
        self.http = aiohttp.ClientSession()
        async with self.http.get(f"http://127.0.0.1:{port}/json/list") as response:
            targets = await response.json(content_type=None)
        page = next(t for t in targets if t["type"] == "page")
        self.ws = await self.http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        return self

    async def _ready(self) -> bool:
        text = (self.profile / "DevToolsActivePort").read_text() if (self.profile / "DevToolsActivePort").exists() else ""
        return bool(text.split())

    async def __aexit__(self, *_exc) -> None:
        for closing in (getattr(self, "ws", None), getattr(self, "http", None)):
            if closing is not None:
                await closing.close()
        self.process.kill()
        await self.process.wait()

    async def call(self, method: str, **params: Any) -> dict:
        message_id = next(self.ids)
        await self.ws.send_str(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            reply = json.loads((await self.ws.receive(timeout=60)).data)
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    async def goto(self, url: str) -> None:
        await self.call("Page.navigate", url=url)

    async def js(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")
