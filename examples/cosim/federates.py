"""Two HELICS message federates for the co-simulation tests (and a model
for users): a grid that sends a measurement every 100 ms to netloop's
endpoint `pmu`, and a controller that answers each measurement it receives
through netloop's endpoint `ctrl`. Each prints, as JSON on stdout, what it
received and at which HELICS time.

    python federates.py grid|controller BROKER_PORT [COUNT [START [END [JOIN_AFTER]]]]

The grid sends its first measurement at HELICS time START (seconds, 0 by
default) and stops at END (2 by default). JOIN_AFTER (seconds, 0 by
default) waits that long before joining: a federate slow to start.
"""

import json
import sys
import time

import helics as h

role, port = sys.argv[1], sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 10
start = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
end = float(sys.argv[5]) if len(sys.argv) > 5 else 2.0
time.sleep(float(sys.argv[6]) if len(sys.argv) > 6 else 0.0)

fi = h.helicsCreateFederateInfo()
h.helicsFederateInfoSetCoreTypeFromString(fi, "zmq")
h.helicsFederateInfoSetCoreInitString(fi, f"--federates=1 --brokerport={port} --timeout=20000ms")
fed = h.helicsCreateMessageFederate(role, fi)
ep = h.helicsFederateRegisterGlobalEndpoint(fed, f"{role}/in", "")
h.helicsFederateEnterExecutingMode(fed)
got = []


def drain():
    while h.helicsEndpointHasMessage(ep):
        m = h.helicsEndpointGetMessage(ep)
        data = h.helicsMessageGetBytes(m)
        got.append([data.decode(), round(h.helicsMessageGetTime(m), 9)])
        if role == "controller":
            h.helicsEndpointSendBytesTo(ep, b"re:" + data, "ctrl")


if role == "grid":
    t = 0.0
    while t < start - 1e-12:
        t = h.helicsFederateRequestTime(fed, start)
        drain()
    for k in range(count):
        h.helicsEndpointSendBytesTo(ep, f"m{k}".encode(), "pmu")
        target = start + (k + 1) * 0.1
        t = 0.0
        while t < target - 1e-12:
            t = h.helicsFederateRequestTime(fed, target)
            drain()
t = 0.0
while t < end - 1e-12:
    t = h.helicsFederateRequestTime(fed, end)
    drain()
print(json.dumps(got))
h.helicsFederateDisconnect(fed)
h.helicsCloseLibrary()
