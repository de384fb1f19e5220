"""The near-limit reference: a bare pycurl CurlMulti + selectolax + Python set crawl loop.

No politeness, no robots.txt, no output, no retries: seeds in, every same-site link followed
once, ``concurrency`` transfers in flight. Host names are mapped to 127.0.0.1 with
CURLOPT_RESOLVE entries and only ``http://h<i>.bench:<port>/`` URLs are ever requested, so it
cannot leave the loopback interface.

    .venv/bin/python bench/bare_loop.py --port 8080 --hosts 50 [--concurrency 64]

Prints ``fetched=<n>`` (pages with status 200) at the end; the bench counts from nginx's log.
"""

from __future__ import annotations

import argparse
from collections import deque
from io import BytesIO
from urllib.parse import urljoin

import pycurl
from selectolax.lexbor import LexborHTMLParser


def join(base: str, href: str) -> str:
    """``urljoin`` with fast paths for absolute URLs and dot-free (root-)relative paths."""
    if href.startswith(("http://", "https://")):
        return href
    if "/." in href or href.startswith((".", "//", "?", "#")) or ":" in href:
        return urljoin(base, href)
    if href.startswith("/"):
        return base[: base.find("/", 8)] + href
    return base[: base.rfind("/") + 1] + href


def crawl(port: int, hosts: int, concurrency: int) -> int:
    netlocs = [f"h{i}.bench:{port}" for i in range(hosts)]
    allowed = {f"http://{n}" for n in netlocs}
    queue = deque(f"http://{n}/" for n in netlocs)
    seen = set(queue)
    multi = pycurl.CurlMulti()
    free: list[pycurl.Curl] = []
    for _ in range(concurrency):
        c = pycurl.Curl()
        c.setopt(pycurl.RESOLVE, [f"{n}:127.0.0.1" for n in netlocs])
        c.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP)
        c.setopt(pycurl.NOPROXY, "*")
        c.setopt(pycurl.FOLLOWLOCATION, 0)
        c.setopt(pycurl.CONNECTTIMEOUT, 10)
        c.setopt(pycurl.TIMEOUT, 30)
        c.setopt(pycurl.NOSIGNAL, 1)
        free.append(c)
    busy: dict[pycurl.Curl, tuple[str, BytesIO]] = {}
    fetched = 0
    while queue or busy:
        while queue and free:
            c = free.pop()
            url = queue.popleft()
            buf = BytesIO()
            c.setopt(pycurl.URL, url)
            c.setopt(pycurl.WRITEDATA, buf)
            busy[c] = (url, buf)
            multi.add_handle(c)
        while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass
        wait_ms = multi.timeout()  # libcurl's own next deadline, -1 for none
        multi.select(1.0 if wait_ms < 0 else min(1.0, wait_ms / 1000))
        while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass
        while True:
            remaining, ok, failed = multi.info_read()
            for c in ok:
                url, buf = busy.pop(c)
                multi.remove_handle(c)
                free.append(c)
                if c.getinfo(pycurl.RESPONSE_CODE) != 200:
                    continue
                fetched += 1
                for node in LexborHTMLParser(buf.getvalue()).css("a[href]"):
                    href = node.attributes.get("href")
                    if not href:
                        continue
                    link = join(url, href).partition("#")[0]
                    if link not in seen and link[: link.find("/", 7)] in allowed:
                        seen.add(link)
                        queue.append(link)
            for c, _errno, _msg in failed:
                busy.pop(c)
                multi.remove_handle(c)
                free.append(c)
            if not remaining:
                break
    for c in free:
        c.close()
    multi.close()
    return fetched


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--hosts", type=int, required=True)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    print(f"fetched={crawl(args.port, args.hosts, args.concurrency)}")


if __name__ == "__main__":
    main()
