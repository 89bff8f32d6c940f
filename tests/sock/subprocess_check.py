#!/usr/bin/env python3
"""subprocess_check.py - CPython's subprocess hands a pooled socket to a
child program as its stdin and stdout.

CPython starts the child with vfork; the child dup2()s the socket over
fds 0 and 1, close_range()s the rest and execs `cat`.  Under the preload
those calls run in the parent's memory, so the shim must leave its records
of the parent's fds alone and let the exec'd program find its pooled fds
itself.  Checks: the echo comes back whole, through the pool when the shim
is preloaded (the kernel's TCP carried less than half of it), EOF when cat
exits, and the parent's own fds 0 and 1 (pipes here) still read and write
their pipe afterwards.  Exit status 0 when all went well.
"""
import os
import socket
import struct
import subprocess
import sys

PAYLOAD = 4 << 20


def tcp_bytes_acked(s):
    # struct tcp_info: 8 one-byte fields, 24 u32, then pacing_rate,
    # max_pacing_rate and bytes_acked (u64)
    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    return struct.unpack_from("Q", info, 120)[0]


def main():
    failed = []

    def check(ok, what):
        print(("ok    " if ok else "FAIL  ") + what, file=sys.stderr)
        if not ok:
            failed.append(what)

    expect_pool = os.environ.get("LD_PRELOAD", "").endswith("libcxlshim.so")
    saved = os.dup(0), os.dup(1)
    r, w = os.pipe()
    os.dup2(r, 0)
    os.dup2(w, 1)
    os.close(r)
    os.close(w)

    lsn = socket.create_server(("127.0.0.1", 0))
    cli = socket.create_connection(lsn.getsockname())
    srv, _ = lsn.accept()
    lsn.close()
    child = subprocess.Popen(["cat"], stdin=srv.fileno(), stdout=srv.fileno())
    srv.close()

    data = os.urandom(PAYLOAD)
    cli.settimeout(30)  # before the fork: it makes the shared socket nonblocking
    pid = os.fork()  # a writer, so that neither way fills while the other waits
    if pid == 0:
        cli.sendall(data)
        cli.shutdown(socket.SHUT_WR)
        os._exit(0)
    got = bytearray()
    while True:
        chunk = cli.recv(1 << 16)
        if not chunk:
            break
        got += chunk
    check(bytes(got) == data, "%d bytes echoed by cat intact (%d back)" % (PAYLOAD, len(got)))
    check(os.waitpid(pid, 0)[1] == 0, "writer")
    check(child.wait(timeout=30) == 0, "cat exited 0")
    pooled = tcp_bytes_acked(cli) < PAYLOAD // 2
    check(pooled == expect_pool, "through the pool: %s, expected %s" % (pooled, expect_pool))
    cli.close()

    os.write(1, b"pipe")
    check(os.read(0, 4) == b"pipe", "the parent's fds 0 and 1 are still its pipe")
    os.dup2(saved[0], 0)
    os.dup2(saved[1], 1)
    print("%d failed" % len(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
