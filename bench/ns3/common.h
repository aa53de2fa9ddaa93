// Shared by the ns-3 simulation-speed peers (dumbbell.cc, wan.cc): option
// reading, the drop counter of the traffic-control layer, and the totals
// each prints. Header-only: build.sh compiles each program as one file.
#pragma once

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <cstdint>
#include <string>

namespace peer
{

// Reads the option at argv[k] ("--name=value" or "--name value", advancing
// k past the value) into opt and val. -h/--help and a missing value call
// usage, which must not return.
template <typename Usage>
void
NextOption(int argc, char** argv, int& k, std::string& opt, std::string& val, Usage usage)
{
    opt = argv[k];
    auto eq = opt.find('=');
    if (eq != std::string::npos)
    {
        val = opt.substr(eq + 1);
        opt = opt.substr(0, eq);
        return;
    }
    if (opt == "-h" || opt == "--help")
    {
        usage("help");
    }
    if (k + 1 >= argc)
    {
        usage("missing value for " + opt);
    }
    val = argv[++k];
}

// Packets the TrafficControlLayer discards because a device's tx queue is
// stopped: with no queue disc, ns-3's flow control stops the device's queue
// when its DropTail queue is full and the layer drops further packets itself
// (trace source "TcDrop") instead of handing them to the device.
inline uint64_t g_tcDrops = 0;

inline void
CountTcDrop(ns3::Ptr<const ns3::Packet>)
{
    ++g_tcDrops;
}

// Connects every node's TcDrop to the counter; false if a node lacks it.
inline bool
CountTcDrops()
{
    using namespace ns3;
    for (NodeList::Iterator it = NodeList::Begin(); it != NodeList::End(); ++it)
    {
        if (!(*it)->GetObject<TrafficControlLayer>()->TraceConnectWithoutContext(
                "TcDrop",
                MakeCallback(&CountTcDrop)))
        {
            return false;
        }
    }
    return true;
}

// What a run's UdpClients sent (packets of 1000 bytes), its UdpServers
// received, and its devices' queues dropped.
struct Totals
{
    uint64_t sent = 0;
    uint64_t received = 0;
    uint64_t devDrops = 0;
};

inline Totals
Tally(const ns3::ApplicationContainer& clients,
      const ns3::ApplicationContainer& servers,
      const ns3::NetDeviceContainer& devices)
{
    using namespace ns3;
    Totals t;
    uint64_t sentBytes = 0;
    for (uint32_t c = 0; c < clients.GetN(); ++c)
    {
        sentBytes += DynamicCast<UdpClient>(clients.Get(c))->GetTotalTx();
    }
    t.sent = sentBytes / 1000;
    for (uint32_t c = 0; c < servers.GetN(); ++c)
    {
        t.received += DynamicCast<UdpServer>(servers.Get(c))->GetReceived();
    }
    for (uint32_t c = 0; c < devices.GetN(); ++c)
    {
        t.devDrops +=
            DynamicCast<PointToPointNetDevice>(devices.Get(c))->GetQueue()->GetTotalDroppedPackets();
    }
    return t;
}

} // namespace peer
