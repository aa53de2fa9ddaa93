"""A real control program for the real-time co-simulation example: a plain
server (no HELICS in it) that answers each measurement with a setpoint.
netloop runs it in the network namespace of the real host `control`.

    python3 controller.py [PORT] [--tcp]

Over UDP (the default) a message is a datagram. With --tcp it listens on
TCP and speaks the framing of netloop's TCP endpoints: each message is its
length (4 bytes, big-endian) and then its bytes, and the answer goes back
on the connection the measurement came on.
"""

import socket
import struct
import sys
import threading

args = [a for a in sys.argv[1:] if not a.startswith("--")]
port = int(args[0]) if args else 5000


def read_exactly(conn: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def serve(conn: socket.socket) -> None:
    with conn:
        while (head := read_exactly(conn, 4)) is not None:
            data = read_exactly(conn, struct.unpack(">I", head)[0])
            if data is None:
                return
            answer = b"re:" + data
            conn.sendall(struct.pack(">I", len(answer)) + answer)


if "--tcp" in sys.argv:
    server = socket.create_server(("0.0.0.0", port))
    while True:
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    while True:
        data, peer = s.recvfrom(65535)
        s.sendto(b"re:" + data, peer)
