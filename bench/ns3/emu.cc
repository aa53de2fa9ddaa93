// netloop reference benchmark, ns-3 side: real-time emulation peer ("emu").
//
// ns-3 3.37 (Debian) in real time, joined to two real interfaces (veth ends
// in the root namespace whose peers are in namespaces h1 and h2) through
// AF_PACKET sockets handed to FdNetDevices:
//
//   h1 ==dev-a== [FdNetDevice] r1 [FdNetDevice] ==dev-b== h2          (--routers 1)
//   h1 ==dev-a== [FdNetDevice] r1 --p2p-- r2 [FdNetDevice] ==dev-b== h2  (--routers 2)
//
// Link k along the chain is 198.18.(k+1).0/24, left end .1, right end .2:
//   h1 198.18.1.1, r1 198.18.1.2; (2 routers) r1 198.18.2.1 -- r2 198.18.2.2,
//   r2 198.18.3.1, h2 198.18.3.2; (1 router) r1 198.18.2.1, h2 198.18.2.2.
// Static routing only, no IPv6. The r1--r2 link is a PointToPointNetDevice
// pair (--mid-rate, --mid-delay) with a DropTail device queue of --queue
// packets and no queue disc.
//
// --bg-pairs N adds N simulated-only node pairs, each joined by its own p2p
// link and carrying one UdpClient->UdpServer CBR flow (198.19.0.0/16, one /30
// per pair). They never touch a real interface.
//
// Usage: see PrintUsage() below. Both "--opt V" and "--opt=V" are accepted.
// Prints exactly one JSON object on stdout at the end; diagnostics on stderr.
// SIGINT/SIGTERM end the run early (the JSON is still printed).

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/fd-net-device-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <regex>
#include <string>
#include <thread>
#include <vector>

using namespace ns3;

namespace
{

using Clock = std::chrono::steady_clock;

struct Args
{
    std::string devA;
    std::string devB;
    uint32_t routers = 2;
    std::string midRate = "1Gbps";
    std::string midDelay = "0ms";
    uint32_t queue = 1000;
    double duration = 60.0;
    uint32_t bgPairs = 0;
    std::string bgLinkRate = "2Mbps";
    std::string bgDelay = "50ms";
    uint32_t bgSize = 1000;
    std::string bgRate = "1.8Mbps";
    uint32_t sockBuf = 0; // SO_RCVBUF/SO_SNDBUF of the packet sockets; 0 = kernel default
};

void
PrintUsage(FILE* f)
{
    std::fprintf(f,
                 "usage: emu --dev-a IF --dev-b IF [--routers 1|2] [--mid-rate RATE]"
                 " [--mid-delay TIME]\n"
                 "           [--queue PKTS] [--duration SECONDS] [--bg-pairs N]"
                 " [--bg-link-rate RATE]\n"
                 "           [--bg-delay TIME] [--bg-size BYTES] [--bg-rate RATE]"
                 " [--sock-buf BYTES]\n"
                 "  RATE is an ns-3 DataRate string (1Gbps, 2Mbps, 500kb/s),"
                 " TIME an ns-3 Time string (10ms, 0ms).\n"
                 "  Must run as root; IF are existing interfaces in this namespace.\n");
}

[[noreturn]] void
Usage(const std::string& msg)
{
    std::fprintf(stderr, "emu: %s\n", msg.c_str());
    PrintUsage(stderr);
    std::exit(2);
}

bool
ValidRate(const std::string& s)
{
    DataRateValue v;
    return v.DeserializeFromString(s, MakeDataRateChecker()) && v.Get().GetBitRate() > 0;
}

// ns-3's Time parser aborts the process on a bad string, so check the form
// first: a non-negative number and an optional unit (seconds if none).
bool
ValidTime(const std::string& s)
{
    static const std::regex re(R"(^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?(y|d|h|min|s|ms|us|ns|ps|fs)?$)");
    return std::regex_match(s, re);
}

Args
ParseArgs(int argc, char** argv)
{
    Args a;
    for (int k = 1; k < argc; ++k)
    {
        std::string opt = argv[k];
        std::string val;
        if (opt == "-h" || opt == "--help")
        {
            PrintUsage(stdout);
            std::exit(0);
        }
        auto eq = opt.find('=');
        if (eq != std::string::npos)
        {
            val = opt.substr(eq + 1);
            opt = opt.substr(0, eq);
        }
        else
        {
            if (k + 1 >= argc)
            {
                Usage("missing value for " + opt);
            }
            val = argv[++k];
        }
        std::replace(opt.begin(), opt.end(), '_', '-');
        char* end = nullptr;
        auto asU32 = [&](uint32_t& dst) {
            errno = 0;
            unsigned long v = std::strtoul(val.c_str(), &end, 10);
            if (errno || end == val.c_str() || *end != '\0' || v > 0xffffffffUL ||
                val[0] == '-')
            {
                Usage("bad value for " + opt + ": " + val);
            }
            dst = static_cast<uint32_t>(v);
        };
        if (opt == "--dev-a")
            a.devA = val;
        else if (opt == "--dev-b")
            a.devB = val;
        else if (opt == "--routers")
            asU32(a.routers);
        else if (opt == "--mid-rate")
            a.midRate = val;
        else if (opt == "--mid-delay")
            a.midDelay = val;
        else if (opt == "--queue")
            asU32(a.queue);
        else if (opt == "--duration")
        {
            a.duration = std::strtod(val.c_str(), &end);
            if (end == val.c_str() || *end != '\0')
                Usage("bad value for --duration: " + val);
        }
        else if (opt == "--bg-pairs")
            asU32(a.bgPairs);
        else if (opt == "--bg-link-rate")
            a.bgLinkRate = val;
        else if (opt == "--bg-delay")
            a.bgDelay = val;
        else if (opt == "--bg-size")
            asU32(a.bgSize);
        else if (opt == "--bg-rate")
            a.bgRate = val;
        else if (opt == "--sock-buf")
            asU32(a.sockBuf);
        else
            Usage("unknown option " + opt);
    }
    if (a.devA.empty() || a.devB.empty())
        Usage("--dev-a and --dev-b are required");
    if (a.devA == a.devB)
        Usage("--dev-a and --dev-b must differ");
    if (a.routers != 1 && a.routers != 2)
        Usage("--routers must be 1 or 2");
    if (!ValidRate(a.midRate))
        Usage("bad --mid-rate (ns-3 DataRate string, e.g. 1Gbps): " + a.midRate);
    if (!ValidTime(a.midDelay))
        Usage("bad --mid-delay (ns-3 Time string, e.g. 10ms): " + a.midDelay);
    if (a.queue == 0)
        Usage("--queue must be >= 1");
    if (!(a.duration > 0) || !std::isfinite(a.duration))
        Usage("--duration must be > 0");
    if (a.bgPairs > 16384)
        Usage("--bg-pairs must be <= 16384 (one /30 per pair in 198.19.0.0/16)");
    if (!ValidRate(a.bgLinkRate))
        Usage("bad --bg-link-rate: " + a.bgLinkRate);
    if (!ValidTime(a.bgDelay))
        Usage("bad --bg-delay: " + a.bgDelay);
    if (!ValidRate(a.bgRate))
        Usage("bad --bg-rate: " + a.bgRate);
    if (a.bgSize < 12 || a.bgSize > 1472)
        Usage("--bg-size must be 12..1472 (UDP payload incl. UdpClient's 12-byte header)");
    return a;
}

// ---------------------------------------------------------------- sockets

// Raw AF_PACKET socket on one interface: all protocols, promiscuous, and not
// reading back our own transmissions. Exits with a clear message on failure.
int
OpenPacketSocket(const std::string& ifname, uint32_t sockBuf)
{
    const unsigned ifindex = if_nametoindex(ifname.c_str());
    if (ifindex == 0)
    {
        std::fprintf(stderr,
                     "emu: interface %s not found in this network namespace (%s)\n",
                     ifname.c_str(),
                     std::strerror(errno));
        std::exit(1);
    }
    int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (fd < 0)
    {
        std::fprintf(stderr,
                     "emu: socket(AF_PACKET) failed: %s (need root/CAP_NET_RAW)\n",
                     std::strerror(errno));
        std::exit(1);
    }
    struct sockaddr_ll sll;
    std::memset(&sll, 0, sizeof sll);
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(ifindex);
    if (bind(fd, reinterpret_cast<struct sockaddr*>(&sll), sizeof sll) < 0)
    {
        std::fprintf(stderr, "emu: bind to %s failed: %s\n", ifname.c_str(), std::strerror(errno));
        std::exit(1);
    }
    struct packet_mreq mr;
    std::memset(&mr, 0, sizeof mr);
    mr.mr_ifindex = static_cast<int>(ifindex);
    mr.mr_type = PACKET_MR_PROMISC;
    if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) < 0)
    {
        std::fprintf(stderr,
                     "emu: PACKET_MR_PROMISC on %s failed: %s\n",
                     ifname.c_str(),
                     std::strerror(errno));
        std::exit(1);
    }
    int one = 1;
    if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0)
    {
        std::fprintf(stderr,
                     "emu: PACKET_IGNORE_OUTGOING on %s failed: %s\n",
                     ifname.c_str(),
                     std::strerror(errno));
        std::exit(1);
    }
    if (sockBuf > 0)
    {
        int b = static_cast<int>(std::min<uint32_t>(sockBuf, 1u << 30));
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &b, sizeof b) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &b, sizeof b) < 0)
        {
            std::fprintf(stderr,
                         "emu: setting socket buffers of %s to %d failed: %s\n",
                         ifname.c_str(),
                         b,
                         std::strerror(errno));
            std::exit(1);
        }
    }
    // Warn (only) if the interface is down or has offloads that would hand us
    // frames larger than the MTU.
    struct ifreq ifr;
    std::memset(&ifr, 0, sizeof ifr);
    std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 && !(ifr.ifr_flags & IFF_UP))
    {
        std::fprintf(stderr, "emu: warning: interface %s is down\n", ifname.c_str());
    }
    // Statistics are reset on read: start counting from here.
    struct tpacket_stats st;
    socklen_t len = sizeof st;
    getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len);
    return fd;
}

struct SockStats
{
    uint64_t packets = 0; // frames queued to the socket (excl. drops)
    uint64_t drops = 0;   // frames the kernel dropped (socket buffer full)
};

SockStats
ReadSockStats(int fd)
{
    SockStats s;
    struct tpacket_stats st;
    std::memset(&st, 0, sizeof st);
    socklen_t len = sizeof st;
    if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
    {
        // The kernel reports tp_packets including the dropped ones.
        s.drops = st.tp_drops;
        s.packets = st.tp_packets >= st.tp_drops ? st.tp_packets - st.tp_drops : 0;
    }
    else
    {
        std::fprintf(stderr, "emu: PACKET_STATISTICS failed: %s\n", std::strerror(errno));
    }
    return s;
}

// ---------------------------------------------------------------- run state

std::atomic<bool> g_stopRequested{false};
Clock::time_point g_runStart;
double g_duration = 60.0;
std::vector<int64_t> g_lagUs;

struct DevCounters
{
    uint64_t tx = 0;       // MacTx: frames handed to write()
    uint64_t txDrop = 0;   // MacTxDrop: write() failed
    uint64_t sniffed = 0;  // PromiscSniffer: fires for every rx frame and every tx frame
};

DevCounters g_dev[2];

void
OnMacTx(DevCounters* c, Ptr<const Packet>)
{
    ++c->tx;
}

void
OnMacTxDrop(DevCounters* c, Ptr<const Packet>)
{
    ++c->txDrop;
}

void
OnSniff(DevCounters* c, Ptr<const Packet>)
{
    ++c->sniffed;
}

void
LagTick()
{
    const int64_t schedNs = Simulator::Now().GetNanoSeconds();
    const int64_t wallNs =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - g_runStart).count();
    g_lagUs.push_back((wallNs - schedNs) / 1000);
    Simulator::Schedule(MilliSeconds(1), &LagTick);
}

void
StopCheck()
{
    const double wall = std::chrono::duration<double>(Clock::now() - g_runStart).count();
    if (g_stopRequested.load() || wall >= g_duration)
    {
        Simulator::Stop();
        return;
    }
    Simulator::Schedule(MilliSeconds(10), &StopCheck);
}

// SIGINT/SIGTERM are blocked in every thread (so the FdReader threads and the
// realtime synchronizer never see EINTR); this thread takes them with sigwait.
void
SignalThread(sigset_t set)
{
    for (;;)
    {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        if (g_stopRequested.exchange(true))
        {
            std::fprintf(stderr, "emu: second signal %d, exiting without results\n", sig);
            std::_Exit(128 + sig);
        }
        std::fprintf(stderr, "emu: signal %d, stopping\n", sig);
    }
}

// Adds dev to node's IPv4 stack with one address, brings it up, and makes
// sure no traffic-control queue disc sits in front of it. Returns the
// interface index.
uint32_t
AddIpv4(Ptr<Node> node, Ptr<NetDevice> dev, Ipv4Address addr, const char* mask)
{
    Ptr<Ipv4> ipv4 = node->GetObject<Ipv4>();
    int32_t ifi = ipv4->GetInterfaceForDevice(dev);
    if (ifi < 0)
        ifi = static_cast<int32_t>(ipv4->AddInterface(dev));
    ipv4->AddAddress(static_cast<uint32_t>(ifi), Ipv4InterfaceAddress(addr, Ipv4Mask(mask)));
    ipv4->SetMetric(static_cast<uint32_t>(ifi), 1);
    ipv4->SetUp(static_cast<uint32_t>(ifi));
    return static_cast<uint32_t>(ifi);
}

Ptr<FdNetDevice>
MakeFdDevice(Ptr<Node> node, int fd, const char* mac)
{
    Ptr<FdNetDevice> dev = CreateObject<FdNetDevice>();
    dev->SetAddress(Mac48Address(mac));
    dev->SetEncapsulationMode(FdNetDevice::DIX);
    dev->SetFileDescriptor(fd);
    node->AddDevice(dev);
    return dev;
}

int64_t
Percentile(const std::vector<int64_t>& sorted, double q)
{
    if (sorted.empty())
        return 0;
    size_t i = static_cast<size_t>(q * static_cast<double>(sorted.size()));
    return sorted[std::min(i, sorted.size() - 1)];
}

} // namespace

int
main(int argc, char** argv)
{
    // Block the stop signals before any thread exists, so every thread
    // (ns-3's FdReader threads included) inherits the mask.
    // A handler is installed too (it never runs while the signals are
    // blocked): a shell starts background jobs with SIGINT ignored, and an
    // ignored signal would be discarded instead of reaching sigwait.
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = [](int) {};
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    const Args args = ParseArgs(argc, argv);
    g_duration = args.duration;

    if (geteuid() != 0)
    {
        std::fprintf(stderr, "emu: must run as root (raw AF_PACKET sockets, promiscuous mode)\n");
        return 1;
    }
    const int fdA = OpenPacketSocket(args.devA, args.sockBuf);
    const int fdB = OpenPacketSocket(args.devB, args.sockBuf);

    std::thread(SignalThread, sigs).detach();

    // Real time, best effort (HardLimit aborts under load on 2 cores), real
    // checksums (the real hosts drop packets with zero checksums).
    GlobalValue::Bind("SimulatorImplementationType", StringValue("ns3::RealtimeSimulatorImpl"));
    Config::SetDefault("ns3::RealtimeSimulatorImpl::SynchronizationMode",
                       StringValue("BestEffort"));
    GlobalValue::Bind("ChecksumEnabled", BooleanValue(true));

    InternetStackHelper stack;
    Ipv4StaticRoutingHelper staticHelper;
    stack.SetRoutingHelper(staticHelper);
    stack.SetIpv6StackInstall(false);

    NodeContainer routers;
    routers.Create(args.routers);
    stack.Install(routers);
    Ptr<Node> r1 = routers.Get(0);
    Ptr<Node> rLast = routers.Get(args.routers - 1);

    // Fresh locally administered MACs (02:ee:<198.18>:<link>:<host>), not
    // the veth ends' own: frames for ns-3 are then PACKET_OTHERHOST to the
    // root namespace's kernel, which ignores them.
    Ptr<FdNetDevice> devA = MakeFdDevice(r1, fdA, "02:ee:c6:12:01:02");
    AddIpv4(r1, devA, "198.18.1.2", "255.255.255.0");

    PointToPointHelper p2p;
    p2p.SetQueue("ns3::DropTailQueue<Packet>",
                 "MaxSize",
                 StringValue(std::to_string(args.queue) + "p"));
    NetDeviceContainer allDevs;
    allDevs.Add(devA);

    Ptr<FdNetDevice> devB;
    if (args.routers == 1)
    {
        devB = MakeFdDevice(r1, fdB, "02:ee:c6:12:02:01");
        AddIpv4(r1, devB, "198.18.2.1", "255.255.255.0");
    }
    else
    {
        p2p.SetDeviceAttribute("DataRate", StringValue(args.midRate));
        p2p.SetChannelAttribute("Delay", StringValue(args.midDelay));
        NetDeviceContainer mid = p2p.Install(r1, rLast);
        allDevs.Add(mid);
        const uint32_t if1 = AddIpv4(r1, mid.Get(0), "198.18.2.1", "255.255.255.0");
        const uint32_t if2 = AddIpv4(rLast, mid.Get(1), "198.18.2.2", "255.255.255.0");
        devB = MakeFdDevice(rLast, fdB, "02:ee:c6:12:03:01");
        AddIpv4(rLast, devB, "198.18.3.1", "255.255.255.0");
        staticHelper.GetStaticRouting(r1->GetObject<Ipv4>())
            ->AddNetworkRouteTo(Ipv4Address("198.18.3.0"),
                                Ipv4Mask("255.255.255.0"),
                                Ipv4Address("198.18.2.2"),
                                if1);
        staticHelper.GetStaticRouting(rLast->GetObject<Ipv4>())
            ->AddNetworkRouteTo(Ipv4Address("198.18.1.0"),
                                Ipv4Mask("255.255.255.0"),
                                Ipv4Address("198.18.2.1"),
                                if2);
    }
    allDevs.Add(devB);

    Ptr<FdNetDevice> fdDevs[2] = {devA, devB};
    for (int i = 0; i < 2; ++i)
    {
        bool ok = fdDevs[i]->TraceConnectWithoutContext("MacTx", MakeBoundCallback(&OnMacTx, &g_dev[i])) &&
                  fdDevs[i]->TraceConnectWithoutContext("MacTxDrop",
                                                        MakeBoundCallback(&OnMacTxDrop, &g_dev[i])) &&
                  fdDevs[i]->TraceConnectWithoutContext("PromiscSniffer",
                                                        MakeBoundCallback(&OnSniff, &g_dev[i]));
        if (!ok)
        {
            std::fprintf(stderr, "emu: cannot connect FdNetDevice trace sources\n");
            return 1;
        }
    }

    // Background: N simulated-only pairs, one p2p link and one CBR UDP flow each.
    ApplicationContainer bgClients;
    ApplicationContainer bgServers;
    if (args.bgPairs > 0)
    {
        NodeContainer bgA;
        NodeContainer bgB;
        bgA.Create(args.bgPairs);
        bgB.Create(args.bgPairs);
        stack.Install(bgA);
        stack.Install(bgB);
        p2p.SetDeviceAttribute("DataRate", StringValue(args.bgLinkRate));
        p2p.SetChannelAttribute("Delay", StringValue(args.bgDelay));
        DataRateValue rate;
        rate.DeserializeFromString(args.bgRate, MakeDataRateChecker());
        const double intervalS =
            static_cast<double>(args.bgSize) * 8.0 / static_cast<double>(rate.Get().GetBitRate());
        const Time interval = NanoSeconds(std::llround(intervalS * 1e9));
        const uint32_t base = Ipv4Address("198.19.0.0").Get();
        for (uint32_t j = 0; j < args.bgPairs; ++j)
        {
            NetDeviceContainer d = p2p.Install(bgA.Get(j), bgB.Get(j));
            allDevs.Add(d);
            AddIpv4(bgA.Get(j), d.Get(0), Ipv4Address(base + 4 * j + 1), "255.255.255.252");
            AddIpv4(bgB.Get(j), d.Get(1), Ipv4Address(base + 4 * j + 2), "255.255.255.252");

            UdpServerHelper server(9);
            ApplicationContainer s = server.Install(bgB.Get(j));
            s.Start(Seconds(0));
            bgServers.Add(s);

            UdpClientHelper client(Ipv4Address(base + 4 * j + 2), 9);
            client.SetAttribute("MaxPackets", UintegerValue(std::numeric_limits<uint32_t>::max()));
            client.SetAttribute("Interval", TimeValue(interval));
            client.SetAttribute("PacketSize", UintegerValue(args.bgSize)); // incl. 12-byte SeqTs
            ApplicationContainer c = client.Install(bgA.Get(j));
            // Phases evenly spread over one interval (as bench/reference.py
            // does for netloop): starts 1/n s apart fell into a few phases
            // when 1/n s was a simple multiple of the interval.
            c.Start(NanoSeconds(static_cast<int64_t>(
                static_cast<double>(interval.GetNanoSeconds()) * j / args.bgPairs)));
            bgClients.Add(c);
        }
    }

    // No queue disc anywhere: the p2p device queue is the only queue (and the
    // FdNetDevices write straight to their sockets).
    TrafficControlHelper tch;
    for (uint32_t k = 0; k < allDevs.GetN(); ++k)
    {
        Ptr<NetDevice> d = allDevs.Get(k);
        Ptr<TrafficControlLayer> tc = d->GetNode()->GetObject<TrafficControlLayer>();
        if (tc && tc->GetRootQueueDiscOnDevice(d))
        {
            tch.Uninstall(d);
        }
        if (tc && tc->GetRootQueueDiscOnDevice(d))
        {
            std::fprintf(stderr, "emu: a root queue disc is still installed\n");
            return 1;
        }
    }
    uint64_t tcDrops = 0;
    for (NodeList::Iterator it = NodeList::Begin(); it != NodeList::End(); ++it)
    {
        (*it)->GetObject<TrafficControlLayer>()->TraceConnectWithoutContext(
            "TcDrop",
            MakeBoundCallback(+[](uint64_t* n, Ptr<const Packet>) { ++*n; }, &tcDrops));
    }

    g_lagUs.reserve(static_cast<size_t>(args.duration * 1000.0) + 10000);
    Simulator::Schedule(MilliSeconds(1), &LagTick);
    Simulator::Schedule(MilliSeconds(10), &StopCheck);
    Simulator::Stop(Seconds(args.duration) + Seconds(1)); // backstop; StopCheck ends it on wall time

    std::fprintf(stderr,
                 "emu: running %u router(s), %s %s mid link, %u bg pairs, %.9g s on %s/%s\n",
                 args.routers,
                 args.midRate.c_str(),
                 args.midDelay.c_str(),
                 args.bgPairs,
                 args.duration,
                 args.devA.c_str(),
                 args.devB.c_str());
    const uint64_t eventsBefore = Simulator::GetEventCount();
    g_runStart = Clock::now();
    Simulator::Run();
    const auto tEnd = Clock::now();
    const uint64_t events = Simulator::GetEventCount() - eventsBefore;
    const double simEnd = Simulator::Now().GetSeconds();

    // Read the kernel's counters before Destroy() closes the sockets.
    const SockStats sA = ReadSockStats(fdA);
    const SockStats sB = ReadSockStats(fdB);

    uint64_t bgSent = 0;
    for (uint32_t k = 0; k < bgClients.GetN(); ++k)
        bgSent += DynamicCast<UdpClient>(bgClients.Get(k))->GetTotalTx() / args.bgSize;
    uint64_t bgRecv = 0;
    for (uint32_t k = 0; k < bgServers.GetN(); ++k)
        bgRecv += DynamicCast<UdpServer>(bgServers.Get(k))->GetReceived();

    std::vector<int64_t> lags = g_lagUs;
    std::sort(lags.begin(), lags.end());
    const uint64_t rxA = g_dev[0].sniffed - g_dev[0].tx;
    const uint64_t rxB = g_dev[1].sniffed - g_dev[1].tx;
    const uint64_t sockIn = sA.packets + sB.packets;
    const uint64_t rx = rxA + rxB;
    const double wallS = std::chrono::duration<double>(tEnd - g_runStart).count();

    std::printf("{\"system\":\"ns-3\",\"version\":\"3.37\",\"mode\":\"realtime-emu\","
                "\"routers\":%u,\"mid_rate\":\"%s\",\"mid_delay\":\"%s\",\"queue\":%u,"
                "\"bg_pairs\":%u,\"sock_buf\":%u,\"duration_s\":%.9g,\"wall_s\":%.6f,\"sim_end_s\":%.6f,"
                "\"interrupted\":%s,\"events\":%" PRIu64 ","
                "\"lag_us\":{\"p50\":%" PRId64 ",\"p99\":%" PRId64 ",\"max\":%" PRId64
                ",\"samples\":%zu},"
                "\"socket_drops\":%" PRIu64 ",\"socket_frames\":%" PRIu64 ","
                "\"rx_frames\":%" PRIu64 ",\"tx_frames\":%" PRIu64 ","
                "\"rx_not_processed\":%" PRIu64 ",\"tx_write_errors\":%" PRIu64 ","
                "\"tc_drops\":%" PRIu64 ","
                "\"dev_a\":{\"if\":\"%s\",\"rx\":%" PRIu64 ",\"tx\":%" PRIu64
                ",\"socket_frames\":%" PRIu64 ",\"socket_drops\":%" PRIu64 "},"
                "\"dev_b\":{\"if\":\"%s\",\"rx\":%" PRIu64 ",\"tx\":%" PRIu64
                ",\"socket_frames\":%" PRIu64 ",\"socket_drops\":%" PRIu64 "},"
                "\"bg_sent\":%" PRIu64 ",\"bg_received\":%" PRIu64 "}\n",
                args.routers,
                args.midRate.c_str(),
                args.midDelay.c_str(),
                args.queue,
                args.bgPairs,
                args.sockBuf,
                args.duration,
                wallS,
                simEnd,
                g_stopRequested.load() ? "true" : "false",
                events,
                Percentile(lags, 0.50),
                Percentile(lags, 0.99),
                lags.empty() ? int64_t{0} : lags.back(),
                lags.size(),
                sA.drops + sB.drops,
                sockIn,
                rx,
                g_dev[0].tx + g_dev[1].tx,
                sockIn > rx ? sockIn - rx : 0,
                g_dev[0].txDrop + g_dev[1].txDrop,
                tcDrops,
                args.devA.c_str(),
                rxA,
                g_dev[0].tx,
                sA.packets,
                sA.drops,
                args.devB.c_str(),
                rxB,
                g_dev[1].tx,
                sB.packets,
                sB.drops,
                bgSent,
                bgRecv);
    std::fflush(stdout);
    Simulator::Destroy();
    return 0;
}
