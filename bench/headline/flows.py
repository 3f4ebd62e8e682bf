# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Traffic endpoints of the headline benchmark (standard library only).

Run inside lab network namespaces with ``nsenter --net=... python flows.py <command>``:

``serve``  storage side, one thread per connection, forever (the caller kills it by PID).
           A request is a 16-byte header ``!cQI`` = op, size, pacing rate (bytes/s, 0 = none):
           ``P`` (put)    the client sends ``size`` bytes, the server answers ``!Q`` bytes received;
           ``G`` (get)    the server sends ``size`` bytes;
           ``S`` (stream) the server sends until the client closes;
           ``W`` (write)  like P without an answer; ``F`` (flush) answers ``!Q`` bytes written since
                          the last F;
           ``Q`` (quit)   the server closes. Requests other than S repeat on one connection.
``xfer``   a checkpoint: ``--bytes`` in ``--chunk`` pieces over a pool of ``--streams`` TCP
           connections, put (save, egress) or get (load, ingress); done when the last chunk is
           acknowledged / received.
``reads``  job reads: ``--readers`` loops, each one new connection per read of ``--bytes``,
           for ``--duration`` seconds; prints every completion time.
``surge``  ``--streams`` connections receiving a stream for ``--duration`` seconds, optionally
           paced by the sender (``--pace`` bytes/s per stream): a surge of a given offered load.

Every client prints one JSON document on stdout. ``--mptcp`` (every command) uses MPTCP sockets
(``IPPROTO_MPTCP``; a server started with it also accepts plain TCP, which falls back).
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import threading
import time

HDR = struct.Struct("!cQI")
ACK = struct.Struct("!Q")
CHUNK = 1 << 20
SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)
TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)
LOWAT = 256 << 10
LOWAT_ON = False
ZEROS = memoryview(bytes(CHUNK))
IPPROTO_MPTCP = getattr(socket, "IPPROTO_MPTCP", 262)
PROTO = [0]  # socket protocol of every socket: 0 (TCP) or IPPROTO_MPTCP (--mptcp)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            raise ConnectionError("peer closed after %d of %d header bytes" % (len(buf), n))
        buf += part
    return bytes(buf)


def _drain(sock, size, buf):
    """Receive exactly ``size`` bytes (or until EOF when size is None); returns the count."""
    view = memoryview(buf)
    got = 0
    while size is None or got < size:
        want = CHUNK if size is None else min(CHUNK, size - got)
        n = sock.recv_into(view[:want])
        if n == 0:
            break
        got += n
    return got


def _send(sock, size):
    sent = 0
    while size is None or sent < size:
        n = CHUNK if size is None else min(CHUNK, size - sent)
        sock.sendall(ZEROS[:n])
        sent += n
    return sent


# ------------------------------------------------------------------ server
def _serve_one(conn):
    """Requests on one connection until ``Q`` (quit) or EOF; ``S`` and ``G`` end the connection."""
    buf = bytearray(CHUNK)
    paced = 0
    written = 0
    try:
        while True:
            hdr = _recv_exact(conn, HDR.size)
            op, size, pace = HDR.unpack(hdr)
            if pace and pace != paced:
                conn.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, pace)
                paced = pace
            if op == b"P":
                got = _drain(conn, size, buf)
                conn.sendall(ACK.pack(got))
            elif op == b"W":
                written += _drain(conn, size, buf)
            elif op == b"F":
                conn.sendall(ACK.pack(written))
                written = 0
            elif op == b"G":
                _send(conn, size)
            elif op == b"S":
                _send(conn, None)
            else:
                break
    except (OSError, ConnectionError):
        pass
    finally:
        conn.close()


def serve(port):
    srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM, PROTO[0])
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    srv.bind(("::", port))
    srv.listen(512)
    print(json.dumps({"listening": port}), flush=True)
    while True:
        conn, _addr = srv.accept()
        threading.Thread(target=_serve_one, args=(conn,), daemon=True).start()


# ------------------------------------------------------------------ clients
def _connect(target, port, timeout=30.0):
    if not PROTO[0]:
        sock = socket.create_connection((target, port), timeout=timeout)
    else:
        fam = socket.AF_INET6 if ":" in target else socket.AF_INET
        sock = socket.socket(fam, socket.SOCK_STREAM, PROTO[0])
        sock.settimeout(timeout)
        try:
            sock.connect((target, port))
        except OSError:
            sock.close()
            raise
    sock.settimeout(None)
    return sock


def _ports(sock):
    local, peer = sock.getsockname(), sock.getpeername()
    return {"src": local[0], "sport": local[1], "dst": peer[0], "dport": peer[1]}


def chunk_sizes(total, chunk):
    """Split ``total`` bytes into chunks of ``chunk`` bytes (the last one shorter)."""
    total, chunk = int(total), int(chunk)
    if chunk <= 0:
        raise ValueError("chunk size must be positive, got %r" % (chunk,))
    full, rest = divmod(total, chunk)
    return [chunk] * full + ([rest] if rest else [])


def xfer(target, port, op, total, streams, chunk, pace=0):
    """A checkpoint of ``total`` bytes in ``chunk``-byte pieces over a pool of ``streams`` connections.

    Each connection takes the next chunk from a shared queue when its previous one has left the
    socket (put, with TCP_NOTSENT_LOWAT) or arrived (get), the way a checkpoint writer's upload pool
    works; the transfer is done when the server confirms every byte (put) or the last chunk arrived.
    """
    chunks = chunk_sizes(total, chunk)
    lock = threading.Lock()
    nxt = [0]
    res = [None] * int(streams)
    t0 = time.monotonic()

    def take():
        with lock:
            if nxt[0] >= len(chunks):
                return None
            nxt[0] += 1
            return chunks[nxt[0] - 1]

    def one(i):
        r = {"stream": i, "bytes": 0, "chunks": 0, "ok": True}
        buf = bytearray(CHUNK)
        try:
            s = _connect(target, port)
            r.update(_ports(s))
            if op == "put" and LOWAT_ON:
                # Unsent data stays below LOWAT: a connection takes its next chunk only when its
                # path has drained the last one, so chunks follow each path's real rate.
                s.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, LOWAT)
            if op == "put" and pace:
                s.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, pace)
            while True:
                size = take()
                if size is None:
                    break
                if op == "put" and LOWAT_ON:
                    s.sendall(HDR.pack(b"W", size, 0))
                    _send(s, size)
                elif op == "put":
                    s.sendall(HDR.pack(b"P", size, 0))
                    _send(s, size)
                    got = ACK.unpack(_recv_exact(s, ACK.size))[0]
                    if got != size:
                        raise ConnectionError("chunk of %d bytes: %d acknowledged" % (size, got))
                else:
                    s.sendall(HDR.pack(b"G", size, pace))
                    got = _drain(s, size, buf)
                    if got != size:
                        raise ConnectionError("chunk of %d bytes: %d received" % (size, got))
                r["bytes"] += size
                r["chunks"] += 1
            if op == "put" and LOWAT_ON:
                s.sendall(HDR.pack(b"F", 0, 0))
                got = ACK.unpack(_recv_exact(s, ACK.size))[0]
                if got != r["bytes"]:
                    raise ConnectionError("server received %d of %d bytes" % (got, r["bytes"]))
            s.sendall(HDR.pack(b"Q", 0, 0))
            s.close()
            r["done"] = round(time.monotonic() - t0, 4)
        except (OSError, ConnectionError) as exc:
            r["ok"] = False
            r["error"] = str(exc)
        res[i] = r

    threads = [threading.Thread(target=one, args=(i,)) for i in range(int(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.monotonic() - t0
    moved = sum(r["bytes"] for r in res)
    return {"op": op, "bytes": int(total), "chunk": int(chunk), "streams": len(res), "seconds": round(secs, 4),
            "ok": all(r["ok"] for r in res) and moved == int(total), "moved": moved, "per_stream": res}


def reads(target, port, size, readers, duration):
    t0 = time.monotonic()
    stop = t0 + duration
    samples, errors = [], []
    lock = threading.Lock()

    def loop(k):
        buf = bytearray(CHUNK)
        while time.monotonic() < stop:
            start = time.monotonic()
            try:
                s = _connect(target, port)
                s.sendall(HDR.pack(b"G", size, 0))
                got = _drain(s, size, buf)
                s.sendall(HDR.pack(b"Q", 0, 0))
                s.close()
                if got != size:
                    raise ConnectionError("short read %d of %d" % (got, size))
                with lock:
                    samples.append({"reader": k, "at": round(start - t0, 4),
                                    "seconds": round(time.monotonic() - start, 5)})
            except (OSError, ConnectionError) as exc:
                with lock:
                    errors.append(str(exc))

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"bytes": size, "readers": readers, "duration": duration, "samples": samples, "errors": errors}


def surge(target, port, streams, duration, pace=0):
    t0 = time.monotonic()
    stop = t0 + duration
    counts = [0] * streams

    def one(i):
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        try:
            s = _connect(target, port)
            s.sendall(HDR.pack(b"S", 0, pace))
            s.settimeout(0.5)
            while time.monotonic() < stop:
                try:
                    n = s.recv_into(view)
                except socket.timeout:
                    continue
                if n == 0:
                    break
                counts[i] += n
            s.close()
        except (OSError, ConnectionError):
            pass

    threads = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.monotonic() - t0
    return {"streams": streams, "seconds": round(secs, 3), "bytes": sum(counts), "per_stream": counts}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mptcp", action="store_true")
    for name in ("xfer", "reads", "surge"):
        p = sub.add_parser(name)
        p.add_argument("--target", required=True)
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--duration", type=float, default=10.0)
        p.add_argument("--bytes", type=int, default=1 << 20)
        p.add_argument("--streams", type=int, default=16)
        p.add_argument("--readers", type=int, default=1)
        p.add_argument("--chunk", type=int, default=2 << 20)
        p.add_argument("--op", choices=["put", "get"], default="put")
        p.add_argument("--pace", type=int, default=0, help="bytes/s per stream (SO_MAX_PACING_RATE), 0 = none")
        p.add_argument("--mptcp", action="store_true", help="MPTCP sockets")
    a = ap.parse_args(argv)
    PROTO[0] = IPPROTO_MPTCP if a.mptcp else 0
    if a.cmd == "serve":
        serve(a.port)
        return 0
    if a.cmd == "xfer":
        out = xfer(a.target, a.port, a.op, a.bytes, a.streams, a.chunk, a.pace)
    elif a.cmd == "reads":
        out = reads(a.target, a.port, a.bytes, a.readers, a.duration)
    else:
        out = surge(a.target, a.port, a.streams, a.duration, a.pace)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
