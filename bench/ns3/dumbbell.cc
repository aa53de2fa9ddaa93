// netloop simulation-speed benchmark, ns-3 side: scenario "dumbbell".
//
// A pure discrete-event simulation (no real time, no real hosts) written the
// way an ns-3 user normally would: helpers, point-to-point links, the ns-3
// IPv4/UDP stack, UdpClient/UdpServer applications, static routing.
//
//   L0..L{H-1} --1G/1ms-- R1 ==1G/10ms== R2 --1G/1ms-- Q0..Q{H-1}
//
// Every link: PointToPointNetDevice, DataRate 1 Gbit/s, DropTailQueue of
// 1000 packets on each device. No traffic-control queue disc (removed, see
// below), so the device queue is the only queue, as in netloop.
//
// Flow i (0 <= i < N): UDP CBR from L(i mod H) to Q(i mod H), dst port
// 5000+i, UDP payload 1000 bytes (UdpClient's 12-byte SeqTs header counts
// inside those 1000 bytes), interval T = 8000 / (load*1e6/N) s, start i*T/N,
// stop at D.
//
// Addresses (never leave the process; taken from 198.18.0.0/15 like every
// other netloop test): left leaf link j = 198.18.0.0 + 4j /30, right leaf link
// j = 198.19.0.0 + 4j /30 (router .1, host .2), bottleneck 198.19.255.252/30.
// Static routes only: leaf default route via its router; R1 routes
// 198.19.0.0/16 via R2, R2 routes 198.18.0.0/16 via R1.
//
// Usage: dumbbell --flows N [--duration D] [--load MBPS] [--hosts-max H]
//                 [--seed S] [--scheduler map|heap|calendar|list|priority-queue]
// (both "--flows N" and "--flows=N" are accepted). Prints one JSON object.

#include "common.h"

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

struct Args
{
    uint32_t flows = 1;
    double duration = 10.0;
    double load = 500.0;
    uint32_t hostsMax = 100;
    uint32_t seed = 1;
    std::string scheduler = "map"; // ns-3's default (ns3::MapScheduler)
};

[[noreturn]] void
Usage(const char* msg)
{
    std::fprintf(stderr,
                 "dumbbell: %s\n"
                 "usage: dumbbell --flows N [--duration S] [--load MBPS] [--hosts-max H]"
                 " [--seed S] [--scheduler map|heap|calendar|list|priority-queue]\n",
                 msg);
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
        peer::NextOption(argc, argv, k, opt, val, [](const std::string& m) { Usage(m.c_str()); });
        std::replace(opt.begin(), opt.end(), '_', '-');
        char* end = nullptr;
        if (opt == "--flows")
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
        else if (opt == "--hosts-max")
        {
            a.hostsMax = std::strtoul(val.c_str(), &end, 10);
        }
        else if (opt == "--seed")
        {
            a.seed = std::strtoul(val.c_str(), &end, 10);
        }
        else if (opt == "--scheduler")
        {
            a.scheduler = val;
            continue;
        }
        else
        {
            Usage(("unknown option " + opt).c_str());
        }
        if (end == val.c_str() || *end != '\0')
        {
            Usage(("bad value for " + opt + ": " + val).c_str());
        }
    }
    if (a.flows == 0 || a.hostsMax == 0 || !(a.duration > 0) || !(a.load > 0) || a.seed == 0)
    {
        Usage("need flows >= 1, hosts-max >= 1, duration > 0, load > 0, seed >= 1");
    }
    if (a.flows > 60000)
    {
        Usage("flows must be <= 60000 (destination port 5000+i)");
    }
    return a;
}

std::string
SchedulerTypeId(const std::string& s)
{
    if (s == "map")
        return "ns3::MapScheduler";
    if (s == "heap")
        return "ns3::HeapScheduler";
    if (s == "calendar")
        return "ns3::CalendarScheduler";
    if (s == "list")
        return "ns3::ListScheduler";
    if (s == "priority-queue")
        return "ns3::PriorityQueueScheduler";
    Usage(("unknown scheduler " + s).c_str());
}

// a.b.c.d as a host-order integer plus 4*j, for /30 subnets.
Ipv4Address
Subnet30(uint32_t base, uint32_t j)
{
    return Ipv4Address(base + 4 * j);
}

} // namespace

int
main(int argc, char** argv)
{
    using Clock = std::chrono::steady_clock;
    const Args args = ParseArgs(argc, argv);
    const auto t0 = Clock::now();

    const uint32_t N = args.flows;
    const uint32_t H = std::min(N, args.hostsMax);
    if (H > 16383)
    {
        Usage("hosts per side must be <= 16383 (one /30 per leaf inside a /16)");
    }

    // Defaults left alone on purpose: no logging is enabled, no pcap/ascii
    // tracing, ChecksumEnabled stays false (ns-3's default), realtime off.
    RngSeedManager::SetSeed(args.seed);
    RngSeedManager::SetRun(1);
    ObjectFactory sched;
    sched.SetTypeId(SchedulerTypeId(args.scheduler));
    Simulator::SetScheduler(sched);

    NodeContainer routers;
    routers.Create(2);
    Ptr<Node> r1 = routers.Get(0);
    Ptr<Node> r2 = routers.Get(1);
    NodeContainer left;
    left.Create(H);
    NodeContainer right;
    right.Create(H);

    // Only static routing (no global routing, no list routing of several
    // protocols): cheap set-up for hundreds of hosts.
    InternetStackHelper stack;
    Ipv4StaticRoutingHelper staticHelper;
    stack.SetRoutingHelper(staticHelper);
    stack.SetIpv6StackInstall(false);
    stack.Install(routers);
    stack.Install(left);
    stack.Install(right);

    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("1000p"));

    // Ipv4AddressHelper::Assign installs TrafficControlHelper::Default()
    // (an FqCoDel root queue disc in 3.37) on each new interface; we remove it
    // right after so that, as in netloop, the 1000-packet device queue is the
    // only queue. TrafficControlLayer then hands packets straight to the
    // device.
    TrafficControlHelper tch;
    NetDeviceContainer allDevices;

    const uint32_t leftBase = Ipv4Address("198.18.0.0").Get();
    const uint32_t rightBase = Ipv4Address("198.19.0.0").Get();
    const Ipv4Mask mask30("255.255.255.252");

    // Bottleneck R1 <-> R2.
    p2p.SetChannelAttribute("Delay", StringValue("10ms"));
    NetDeviceContainer bnDev = p2p.Install(r1, r2);
    Ipv4AddressHelper addr;
    addr.SetBase("198.19.255.252", mask30);
    Ipv4InterfaceContainer bnIf = addr.Assign(bnDev);
    tch.Uninstall(bnDev);
    allDevices.Add(bnDev);

    // Leaf links. Device 0 of each pair is on the router (gets .1).
    p2p.SetChannelAttribute("Delay", StringValue("1ms"));
    std::vector<Ipv4Address> rightHostAddr(H);
    for (uint32_t j = 0; j < H; ++j)
    {
        for (int side = 0; side < 2; ++side)
        {
            Ptr<Node> router = side == 0 ? r1 : r2;
            Ptr<Node> host = side == 0 ? left.Get(j) : right.Get(j);
            NetDeviceContainer d = p2p.Install(router, host);
            addr.SetBase(Subnet30(side == 0 ? leftBase : rightBase, j), mask30);
            Ipv4InterfaceContainer ifc = addr.Assign(d);
            tch.Uninstall(d);
            allDevices.Add(d);
            // Leaf: default route via its router.
            Ptr<Ipv4StaticRouting> hr =
                staticHelper.GetStaticRouting(host->GetObject<Ipv4>());
            hr->SetDefaultRoute(ifc.GetAddress(0), ifc.Get(1).second);
            if (side == 1)
            {
                rightHostAddr[j] = ifc.GetAddress(1);
            }
        }
    }
    // Routers: one aggregate route for the far side.
    staticHelper.GetStaticRouting(r1->GetObject<Ipv4>())
        ->AddNetworkRouteTo(Ipv4Address(rightBase),
                            Ipv4Mask("255.255.0.0"),
                            bnIf.GetAddress(1),
                            bnIf.Get(0).second);
    staticHelper.GetStaticRouting(r2->GetObject<Ipv4>())
        ->AddNetworkRouteTo(Ipv4Address(leftBase),
                            Ipv4Mask("255.255.0.0"),
                            bnIf.GetAddress(0),
                            bnIf.Get(1).second);

    // Sanity: no queue disc left anywhere.
    for (uint32_t k = 0; k < allDevices.GetN(); ++k)
    {
        Ptr<NetDevice> d = allDevices.Get(k);
        Ptr<TrafficControlLayer> tc = d->GetNode()->GetObject<TrafficControlLayer>();
        if (tc && tc->GetRootQueueDiscOnDevice(d))
        {
            std::fprintf(stderr, "dumbbell: a root queue disc is still installed\n");
            return 1;
        }
    }

    // With no queue disc, ns-3's flow control stops the device's tx queue as
    // soon as its 1000-packet DropTail queue is full, and TrafficControlLayer
    // then discards further packets itself (trace source "TcDrop") instead of
    // handing them to the device; so overflow drops show up here, not in the
    // device queue's own drop counter. The callback costs nothing unless a
    // packet is dropped.
    if (!peer::CountTcDrops())
    {
        std::fprintf(stderr, "dumbbell: no TrafficControlLayer trace source \"TcDrop\"\n");
        return 1;
    }

    // Applications.
    const double T = 1000.0 * 8.0 / (args.load * 1e6 / N); // seconds
    const Time interval = NanoSeconds(std::llround(T * 1e9));
    const Time stop = NanoSeconds(std::llround(args.duration * 1e9));
    // Sinks stay open a little past D so packets in flight at D arrive
    // (path delay 12 ms + queueing); nothing is scheduled after the last one.
    const Time sinkStop = stop + Seconds(1.0);

    ApplicationContainer clients;
    ApplicationContainer servers;
    for (uint32_t i = 0; i < N; ++i)
    {
        const uint32_t h = i % H;
        const uint16_t port = static_cast<uint16_t>(5000 + i);

        UdpServerHelper server(port);
        ApplicationContainer s = server.Install(right.Get(h));
        s.Start(Seconds(0));
        s.Stop(sinkStop);
        servers.Add(s);

        UdpClientHelper client(rightHostAddr[h], port);
        client.SetAttribute("MaxPackets", UintegerValue(std::numeric_limits<uint32_t>::max()));
        client.SetAttribute("Interval", TimeValue(interval));
        client.SetAttribute("PacketSize", UintegerValue(1000)); // incl. 12-byte SeqTs header
        ApplicationContainer c = client.Install(left.Get(h));
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
    const double setupS = std::chrono::duration<double>(t1 - t0).count();
    const double wallS = std::chrono::duration<double>(t2 - t1).count();

    std::printf("{\"system\":\"ns-3\",\"version\":\"3.37\",\"scenario\":\"dumbbell\","
                "\"flows\":%" PRIu32 ",\"hosts_per_side\":%" PRIu32 ",\"duration_s\":%.9g,"
                "\"load_mbps\":%.9g,\"seed\":%" PRIu32 ",\"scheduler\":\"%s\","
                "\"wall_s\":%.6f,\"setup_s\":%.6f,\"events\":%" PRIu64 ","
                "\"packets_sent\":%" PRIu64 ",\"packets_received\":%" PRIu64
                ",\"drops_tc_queue_stopped\":%" PRIu64
                ",\"drops_device_queue\":%" PRIu64 ",\"unaccounted\":%" PRId64 ",\"sim_end_s\":%.9g,\"max_rss_kb\":%ld}\n",
                N,
                H,
                args.duration,
                args.load,
                args.seed,
                args.scheduler.c_str(),
                wallS,
                setupS,
                events,
                tot.sent,
                tot.received,
                peer::g_tcDrops,
                tot.devDrops,
                static_cast<int64_t>(tot.sent) -
                    static_cast<int64_t>(tot.received + peer::g_tcDrops + tot.devDrops),
                Simulator::Now().GetSeconds(),
                ru.ru_maxrss);
    std::fflush(stdout);
    Simulator::Destroy();
    return 0;
}
