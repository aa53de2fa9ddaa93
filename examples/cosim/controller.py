"""A real control program for the real-time co-simulation example: a plain
UDP server (no HELICS in it) that answers each measurement with a setpoint.
netloop runs it in the network namespace of the real host `control`.

    python3 controller.py [PORT]
"""

import socket
import sys

port = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", port))
while True:
    data, peer = s.recvfrom(65535)
    s.sendto(b"re:" + data, peer)
