// netloop simulation-speed benchmark, ns-3 side: scenario "wan".
//
// The same network as netloop's (crates/netloop-cli/src/scenarios.rs),
// built from the same integer arithmetic:
//
// - S sites, each a router with 4 hosts on 1 Gbit/s, 100 us links;
// - router links: a ring (s, s+1 mod S), then one chord per site
//   (s, (37 s + 11) mod S) unless that is s itself, a ring neighbour or a
//   link already made; each 1 Gbit/s with delay 2 + ((31 a + 17 b) mod 9) ms
//   for sites a < b;
// - N UDP CBR flows of 1000-byte payloads (UdpClient's 12-byte SeqTs header
//   inside them) at load/N each: flow i from host (i / S) mod 4 of site
//   a = i mod S to host (i / S + 1) mod 4 of site
//   (a + 1 + 13 i mod (S - 1)) mod S, port 5000 + i mod 60000, interval
//   T = 8000 / (load * 1e6 / N) s, start i T / N, stop at D; the run
//   lasts until D + 1 s.
//
// Every device: PointToPointNetDevice with a 1000-packet DropTail queue and
// no traffic-control queue disc (as in dumbbell.cc). Routing: ns-3's global
// routing (shortest paths by hop count, as netloop's). Addresses: link k
// (host links first, site by site, then router links in the order made)
// gets 198.18.0.0 + 4k /30.
//
// Usage: wan --sites S --flows N [--duration D] [--load MBPS] [--seed S]
// Prints one JSON object, as dumbbell does.

#include "common.h"

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <sys/resource.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

using namespace ns3;

namespace
{

const uint32_t kHosts = 4;

struct Args
{
    uint32_t sites = 64;
    uint32_t flows = 1;
    double duration = 10.0;
    double load = 500.0;
    uint32_t seed = 1;
};

[[noreturn]] void
Usage(const std::string& msg)
{
    std::fprintf(stderr,
                 "wan: %s\nusage: wan --sites S --flows N [--duration S] [--load MBPS] [--seed S]\n",
                 msg.c_str());
    std::exit(2);
}

Args
ParseArgs(int argc, char** argv)
{
    Args a;
    for (int k = 1; k < argc; ++k)
    {
        std::string opt;
        std::string val;
        peer::NextOption(argc, argv, k, opt, val, Usage);
        char* end = nullptr;
        if (opt == "--sites")
        {
            a.sites = std::strtoul(val.c_str(), &end, 10);
        }
        else if (opt == "--flows")
        {
            a.flows = std::strtoul(val.c_str(), &end, 10);
        }
        else if (opt == "--duration")
        {
            a.duration = std::strtod(val.c_str(), &end);
        }
        else if (opt == "--load")
        {
            a.load = std::strtod(val.c_str(), &end);
        }
        else if (opt == "--seed")
        {
            a.seed = std::strtoul(val.c_str(), &end, 10);
        }
        else
        {
            Usage("unknown option " + opt);
        }
        if (end == val.c_str() || *end != '\0')
        {
            Usage("bad value for " + opt + ": " + val);
        }
    }
    if (a.sites < 4 || a.flows == 0 || !(a.duration > 0) || !(a.load > 0) || a.seed == 0)
    {
        Usage("need sites >= 4, flows >= 1, duration > 0, load > 0, seed >= 1");
    }
    return a;
}

// The router links, as scenarios.rs makes them: (a, b, delay ms), a < b.
std::vector<std::tuple<uint32_t, uint32_t, uint32_t>>
WanLinks(uint32_t sites)
{
    std::vector<std::tuple<uint32_t, uint32_t, uint32_t>> made;
    auto add = [&](uint32_t x, uint32_t y) {
        uint32_t a = std::min(x, y);
        uint32_t b = std::max(x, y);
        if (a == b)
        {
            return;
        }
        for (auto& l : made)
        {
            if (std::get<0>(l) == a && std::get<1>(l) == b)
            {
                return;
            }
        }
        made.emplace_back(a, b, 2 + (31 * a + 17 * b) % 9);
    };
    for (uint32_t s = 0; s < sites; ++s)
    {
        add(s, (s + 1) % sites);
    }
    for (uint32_t s = 0; s < sites; ++s)
    {
        uint32_t t = (37 * s + 11) % sites;
        bool neighbour = t == (s + 1) % sites || (t + 1) % sites == s;
        if (!neighbour)
        {
            add(s, t);
        }
    }
    return made;
}

} // namespace

int
main(int argc, char** argv)
{
    using Clock = std::chrono::steady_clock;
    const Args args = ParseArgs(argc, argv);
    const auto t0 = Clock::now();
    const uint32_t S = args.sites;
    const uint32_t N = args.flows;

    RngSeedManager::SetSeed(args.seed);
    RngSeedManager::SetRun(1);

    NodeContainer routers;
    routers.Create(S);
    NodeContainer hosts;
    hosts.Create(S * kHosts);

    InternetStackHelper stack;
    stack.SetIpv6StackInstall(false);
    stack.Install(routers);
    stack.Install(hosts);

    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("1000p"));
    TrafficControlHelper tch;
    NetDeviceContainer allDevices;
    Ipv4AddressHelper addr;
    const Ipv4Mask mask30("255.255.255.252");
    const uint32_t base = Ipv4Address("198.18.0.0").Get();
    uint32_t k = 0;
    auto connect = [&](Ptr<Node> a, Ptr<Node> b, const std::string& delay) {
        p2p.SetChannelAttribute("Delay", StringValue(delay));
        NetDeviceContainer d = p2p.Install(a, b);
        addr.SetBase(Ipv4Address(base + 4 * k++), mask30);
        Ipv4InterfaceContainer ifc = addr.Assign(d);
        tch.Uninstall(d);
        allDevices.Add(d);
        return ifc;
    };
    std::vector<Ipv4Address> hostAddr(S * kHosts);
    for (uint32_t s = 0; s < S; ++s)
    {
        for (uint32_t j = 0; j < kHosts; ++j)
        {
            Ipv4InterfaceContainer ifc =
                connect(hosts.Get(s * kHosts + j), routers.Get(s), "100us");
            hostAddr[s * kHosts + j] = ifc.GetAddress(0);
        }
    }
    for (auto& l : WanLinks(S))
    {
        connect(routers.Get(std::get<0>(l)),
                routers.Get(std::get<1>(l)),
                std::to_string(std::get<2>(l)) + "ms");
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    if (!peer::CountTcDrops())
    {
        std::fprintf(stderr, "wan: no TrafficControlLayer trace source \"TcDrop\"\n");
        return 1;
    }

    const double T = 1000.0 * 8.0 / (args.load * 1e6 / N);
    const Time interval = NanoSeconds(std::llround(T * 1e9));
    const Time stop = NanoSeconds(std::llround(args.duration * 1e9));
    const Time sinkStop = stop + Seconds(1.0);
    ApplicationContainer clients;
    ApplicationContainer servers;
    for (uint32_t i = 0; i < N; ++i)
    {
        const uint32_t a = i % S;
        const uint32_t b = (a + 1 + (13 * i) % (S - 1)) % S;
        const uint32_t from = a * kHosts + (i / S) % kHosts;
        const uint32_t to = b * kHosts + (i / S + 1) % kHosts;
        const uint16_t port = static_cast<uint16_t>(5000 + i % 60000);

        UdpServerHelper server(port);
        ApplicationContainer sv = server.Install(hosts.Get(to));
        sv.Start(Seconds(0));
        sv.Stop(sinkStop);
        servers.Add(sv);

        UdpClientHelper client(hostAddr[to], port);
        client.SetAttribute("MaxPackets", UintegerValue(std::numeric_limits<uint32_t>::max()));
        client.SetAttribute("Interval", TimeValue(interval));
        client.SetAttribute("PacketSize", UintegerValue(1000));
        ApplicationContainer c = client.Install(hosts.Get(from));
        c.Start(NanoSeconds(std::llround(i * T / N * 1e9)));
        c.Stop(stop);
        clients.Add(c);
    }
    Simulator::Stop(sinkStop);

    const auto t1 = Clock::now();
    const uint64_t eventsBefore = Simulator::GetEventCount();
    Simulator::Run();
    const auto t2 = Clock::now();
    const uint64_t events = Simulator::GetEventCount() - eventsBefore;

    const peer::Totals tot = peer::Tally(clients, servers, allDevices);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    std::printf("{\"system\":\"ns-3\",\"version\":\"3.37\",\"scenario\":\"wan\","
                "\"sites\":%" PRIu32 ",\"flows\":%" PRIu32 ",\"duration_s\":%.9g,"
                "\"load_mbps\":%.9g,\"seed\":%" PRIu32 ","
                "\"wall_s\":%.6f,\"setup_s\":%.6f,\"events\":%" PRIu64 ","
                "\"packets_sent\":%" PRIu64 ",\"packets_received\":%" PRIu64
                ",\"drops_tc_queue_stopped\":%" PRIu64 ",\"drops_device_queue\":%" PRIu64
                ",\"sim_end_s\":%.9g,\"max_rss_kb\":%ld}\n",
                S,
                N,
                args.duration,
                args.load,
                args.seed,
                std::chrono::duration<double>(t2 - t1).count(),
                std::chrono::duration<double>(t1 - t0).count(),
                events,
                tot.sent,
                tot.received,
                peer::g_tcDrops,
                tot.devDrops,
                Simulator::Now().GetSeconds(),
                ru.ru_maxrss);
    std::fflush(stdout);
    Simulator::Destroy();
    return 0;
}
