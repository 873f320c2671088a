"""A TCP relay to the test server's Unix socket, in a thread of its own: what a test points a
worker at when it must take the database away (close the relay: every connection is cut and new
ones are refused) or reach it from another network namespace."""

from __future__ import annotations

import asyncio
import contextlib
import threading


class Relay:
    """TCP on 0.0.0.0:port -> the server's Unix socket, in a thread of its own."""

    def __init__(self, unix_path: str, host: str = "0.0.0.0") -> None:
        self.unix_path = unix_path
        self.host = host
        self.links: set[asyncio.StreamWriter] = set()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.port = 0
        self.thread = threading.Thread(target=self._run, daemon=True, name="fleet-relay")
        self.thread.start()
        if not self.ready.wait(10):
            raise RuntimeError("the relay did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._client, host=self.host, port=0))
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        self.server = server
        self.loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self.unix_path)
        except OSError:
            writer.close()
            return
        self.links.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(OSError):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def close(self) -> None:
        """Stop listening and cut every relayed connection: the database is gone. Once."""
        if not self.thread.is_alive():
            return
        done = threading.Event()

        def shut() -> None:
            self.server.close()
            for w in self.links:
                w.transport.abort()
            self.links.clear()
            done.set()

        self.loop.call_soon_threadsafe(shut)
        done.wait(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
