"""A small power grid and its controller as HELICS federates, for the
co-simulation example (docs/cosimulation.md).

`grid`: one balancing area's frequency (the swing equation, per unit:
M dΔf/dt = ΔP_gen − ΔP_load − D·Δf, with a generator that follows its
setpoint through a 0.5 s lag) and a load step of +0.1 pu at 1 s. Every
100 ms it sends the frequency deviation to netloop's endpoint `pmu`; the
setpoints that come back move the generator when they arrive. It prints,
as JSON, the frequency nadir (Hz, on a 50 Hz grid), the integral of its
absolute deviation (Hz·s), the setpoints it got and the trace.

`agc`: the control centre's controller (agc.py's PI law), answering each
measurement through netloop's endpoint `ctrl` (simulated time only; in
real time, grid_rt.toml runs agc.py as a real program instead).

    python grid.py grid|agc BROKER_PORT [END]
"""

import json
import sys

import helics as h

from agc import Agc

role, port = sys.argv[1], sys.argv[2]
end = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
M, D, TG = 10.0, 1.0, 0.5  # inertia (2H), load damping, governor lag (s)
DT, PERIOD, STEP_AT, STEP = 0.01, 0.1, 1.0, 0.1
HZ = 50.0

fi = h.helicsCreateFederateInfo()
h.helicsFederateInfoSetCoreTypeFromString(fi, "zmq")
h.helicsFederateInfoSetCoreInitString(fi, f"--federates=1 --brokerport={port} --timeout=20000ms")
fed = h.helicsCreateMessageFederate(role, fi)
ep = h.helicsFederateRegisterGlobalEndpoint(fed, "grid/in" if role == "grid" else "controller/in", "")
h.helicsFederateEnterExecutingMode(fed)

if role == "grid":
    df = p_gen = p_set = 0.0
    nadir = iae = 0.0
    got = 0
    trace = []
    n = round(end / DT)
    t = 0.0
    for k in range(n):
        now = k * DT
        if k % round(PERIOD / DT) == 0:
            h.helicsEndpointSendBytesTo(ep, json.dumps({"t": round(now, 6), "df": df}).encode(), "pmu")
            trace.append([round(now, 3), round(df * HZ, 5)])
        target = (k + 1) * DT
        while t < target - 1e-12:
            t = h.helicsFederateRequestTime(fed, target)
            while h.helicsEndpointHasMessage(ep):
                m = json.loads(h.helicsMessageGetBytes(h.helicsEndpointGetMessage(ep)))
                p_set = m["p_set"]
                got += 1
        load = STEP if now >= STEP_AT else 0.0
        p_gen += DT * (p_set - p_gen) / TG
        df += DT * (p_gen - load - D * df) / M
        nadir = min(nadir, df)
        iae += abs(df) * DT
    print(json.dumps({"nadir_hz": nadir * HZ, "iae_hz_s": iae * HZ, "setpoints": got, "trace": trace}))
else:
    agc = Agc()
    t = 0.0
    while t < end - 1e-12:
        t = h.helicsFederateRequestTime(fed, end)
        while h.helicsEndpointHasMessage(ep):
            m = json.loads(h.helicsMessageGetBytes(h.helicsEndpointGetMessage(ep)))
            reply = {"t": m["t"], "p_set": agc.setpoint(m["df"])}
            h.helicsEndpointSendBytesTo(ep, json.dumps(reply).encode(), "ctrl")
    print(json.dumps({}))
h.helicsFederateDisconnect(fed)
h.helicsCloseLibrary()
