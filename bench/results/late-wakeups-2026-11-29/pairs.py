"""The simulated pairs of the mixed experiment without its real hosts, as
bench/reference.py writes them: `python3 pairs.py N DURATION > pairs.toml`
(here N = 1000, DURATION = 10s). Each pair: two hosts on a 2 Mbit/s, 50 ms
link, a 1.8 Mbit/s UDP flow of 1000-byte datagrams, starts spread over one
sending interval."""
import sys
n=int(sys.argv[1]); dur=sys.argv[2] if len(sys.argv)>2 else "3s"
interval_ns=1000*8/1.8e6*1e9
L=[f"[run]\nduration = \"{dur}\"\nseed = 1\n"]
for i in range(n):
    L.append(f'[[node]]\nname = "b{i}a"\nkind = "host"\n[[node]]\nname = "b{i}b"\nkind = "host"\n'
             f'[[link]]\nendpoints = ["b{i}a", "b{i}b"]\nrate = "2Mbps"\n'
             f'delay = "50ms"\n'
             f'[[traffic]]\nkind = "udp-cbr"\nfrom = "b{i}a"\nto = "b{i}b"\nrate = "1.8Mbps"\n'
             f'size = "1000B"\nstart = "{round(i*interval_ns/max(n,1))}ns"\n')
print("\n".join(L))
