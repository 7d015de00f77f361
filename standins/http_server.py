"""Serving a stand-in's aiohttp application on loopback, the same way for every stand-in."""

from __future__ import annotations

from aiohttp import web

__all__ = ["start_app"]


async def start_app(app: web.Application, host: str, port: int) -> tuple[str, web.AppRunner]:
    """Serve `app` on host:port (0 = an ephemeral port): its base URL and runner (clean it up).

    The first bound socket names the URL: with port 0 a host name bound twice (IPv4 and IPv6)
    gets two different ports, and a wildcard address is reachable via loopback."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    bound_host, bound_port = runner.addresses[0][:2]
    bound_host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(bound_host, bound_host)
    url_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    return f"http://{url_host}:{bound_port}", runner
