"""The control centre's automatic generation control (AGC): a PI law on the
grid's frequency deviation, and a real program around it.

As a program (grid_rt.toml runs it in the network namespace of the real
host `control`): a plain UDP server, no HELICS in it, that answers each
measurement `{"t": …, "df": …}` with a setpoint `{"t": …, "p_set": …}`.

    python3 agc.py [PORT]

grid.py's `agc` federate uses the same law in simulated time.
"""

import json
import socket
import sys

# Gains in per unit: the generator's setpoint moves 4 pu per pu of
# frequency deviation, plus 2 pu per pu-second of its integral.
KP, KI = 4.0, 2.0
PERIOD = 0.1  # s between measurements, the integral's step


class Agc:
    """PI control of the frequency deviation (per unit)."""

    def __init__(self) -> None:
        self.integral = 0.0

    def setpoint(self, df: float) -> float:
        self.integral += df * PERIOD
        return -KP * df - KI * self.integral


def serve(port: int) -> None:
    agc = Agc()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    while True:
        data, peer = s.recvfrom(65535)
        m = json.loads(data)
        s.sendto(json.dumps({"t": m["t"], "p_set": agc.setpoint(m["df"])}).encode(), peer)


if __name__ == "__main__":
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else 5000)
