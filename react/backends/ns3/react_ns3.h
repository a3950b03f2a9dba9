// REACT's ns-3 world: the fabric, per-flow ECMP routing and the collective's flow driver.
//
// Compiled at run time by cppyy inside the ns-3 child process (react/backends/ns3/child.py),
// after `from ns import ns` has loaded every ns-3 module's headers. Everything that runs per
// packet or per flow lives here, in C++: Python only builds the world from plain numbers and
// reads the results, so no Python code is called from inside the simulation.
//
// Addresses: host i is 10.0.0.0 + i + 1 on its only interface; switch interfaces take
// 11.0.0.0 + k. A flow's connection index `conn` (the scenario's port) is its destination TCP
// port minus kPortBase; ACKs carry it as their source port.
//
// Routing (TableRouting): ns-3 has no per-flow ECMP, and per-packet random ECMP reorders DCTCP
// flows until the process aborts. Each switch instead looks its output interface up in a table
// keyed by (switch, source host, destination host, conn), filled by Python from flowsim's own
// ECMP choice (flowsim.routing.Router.route), so both simulators send every flow, and its ACKs,
// along the same path.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace react_ns3
{

using namespace ns3;

constexpr uint16_t kPortBase = 10000;  // a connection listens on kPortBase + conn
constexpr uint16_t kPortEnd = 49152;   // ns-3's ephemeral (source) ports start here
constexpr uint32_t kHostBase = 0x0A000001u;   // 10.0.0.1
constexpr uint32_t kSwitchBase = 0x0B000001u; // 11.0.0.1

inline uint64_t
RouteKey(uint64_t node, uint64_t src, uint64_t dst, uint64_t conn)
{
    return ((node * 65536u + src) * 65536u + dst) * 65536u + conn;
}

// Shared forwarding state of every switch.
struct RouteTable
{
    std::unordered_map<uint64_t, uint32_t> out; // RouteKey -> output interface
    uint64_t misses = 0;                        // packets with no entry (dropped)
};

class TableRouting : public Ipv4RoutingProtocol
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("react_ns3::TableRouting")
                                .SetParent<Ipv4RoutingProtocol>()
                                .SetGroupName("Internet");
        return tid;
    }

    TableRouting(RouteTable* table, uint32_t node, bool host)
        : m_table(table),
          m_node(node),
          m_host(host)
    {
    }

    // Gateway (neighbour's address) of each interface, by interface index.
    void SetGateway(uint32_t iface, uint32_t addr)
    {
        if (m_gateway.size() <= iface)
        {
            m_gateway.resize(iface + 1, 0);
            m_forwarded.resize(iface + 1, 0);
        }
        m_gateway[iface] = addr;
    }

    void SetOwnAddress(uint32_t addr)
    {
        m_own = addr;
    }

    uint64_t Forwarded(uint32_t iface) const
    {
        return iface < m_forwarded.size() ? m_forwarded[iface] : 0;
    }

    Ptr<Ipv4Route> RouteOutput(Ptr<Packet> p,
                               const Ipv4Header& header,
                               Ptr<NetDevice> oif,
                               Socket::SocketErrno& sockerr) override
    {
        // Only hosts originate packets, and a host has one interface (index 1; 0 is loopback).
        sockerr = Socket::ERROR_NOTERROR;
        return MakeRoute(header.GetDestination(), Ipv4Address(m_own), 1);
    }

    bool RouteInput(Ptr<const Packet> p,
                    const Ipv4Header& header,
                    Ptr<const NetDevice> idev,
                    const UnicastForwardCallback& ucb,
                    const MulticastForwardCallback& mcb,
                    const LocalDeliverCallback& lcb,
                    const ErrorCallback& ecb) override
    {
        if (m_host)
        {
            if (header.GetDestination().Get() != m_own)
            {
                return false; // hosts never forward
            }
            lcb(p, header, m_ipv4->GetInterfaceForDevice(idev));
            return true;
        }
        uint8_t ports[4];
        p->CopyData(ports, 4);
        uint32_t sport = (uint32_t(ports[0]) << 8) | ports[1];
        uint32_t dport = (uint32_t(ports[2]) << 8) | ports[3];
        uint32_t conn = (dport >= kPortBase && dport < kPortEnd) ? dport - kPortBase
                                                                 : sport - kPortBase;
        uint64_t src = header.GetSource().Get() - kHostBase;
        uint64_t dst = header.GetDestination().Get() - kHostBase;
        auto it = m_table->out.find(RouteKey(m_node, src, dst, conn & 0xffff));
        if (it == m_table->out.end())
        {
            m_table->misses++;
            return false;
        }
        uint32_t oif = it->second;
        m_forwarded[oif]++;
        ucb(MakeRoute(header.GetDestination(), header.GetSource(), oif), p, header);
        return true;
    }

    void NotifyInterfaceUp(uint32_t) override
    {
    }

    void NotifyInterfaceDown(uint32_t) override
    {
    }

    void NotifyAddAddress(uint32_t, Ipv4InterfaceAddress) override
    {
    }

    void NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress) override
    {
    }

    void SetIpv4(Ptr<Ipv4> ipv4) override
    {
        m_ipv4 = ipv4;
    }

    void PrintRoutingTable(Ptr<OutputStreamWrapper>, Time::Unit) const override
    {
    }

  private:
    Ptr<Ipv4Route> MakeRoute(Ipv4Address dst, Ipv4Address src, uint32_t oif)
    {
        Ptr<Ipv4Route> route = Create<Ipv4Route>();
        route->SetDestination(dst);
        route->SetSource(src);
        route->SetGateway(Ipv4Address(m_gateway[oif]));
        route->SetOutputDevice(m_ipv4->GetNetDevice(oif));
        return route;
    }

    RouteTable* m_table;
    uint32_t m_node;
    bool m_host;
    uint32_t m_own = 0;
    Ptr<Ipv4> m_ipv4;
    std::vector<uint32_t> m_gateway;
    std::vector<uint64_t> m_forwarded;
};

// One transfer: a fresh TCP connection from src to dst on port kPortBase + conn.
struct Flow
{
    uint32_t src;
    uint32_t dst;
    uint32_t conn;
    uint64_t bytes;  // 0: long-lived, runs until stopped
    int32_t epoch;   // -1: background
    int32_t waiting; // flows of its epoch still to end before it may start
    std::vector<int32_t> next;
    double start = -1.0;
    double end = -1.0;
    uint64_t sent = 0;
    uint64_t received = 0;
    bool closed = false;
    Ptr<Socket> tx;
};

// One execution of a collective: its flows start as their dependencies end.
struct Epoch
{
    std::vector<int32_t> flows;
    int32_t left = 0;
    double start = -1.0;
    double end = -1.0;
    bool stop = false;  // stop the simulator when this epoch ends (a batch's last epoch)
    int32_t next = -1;  // the epoch that starts gap seconds after this one ends
    double gap = 0.0;
};

class World
{
  public:
    // -- building --------------------------------------------------------------------------
    void SetDefault(const std::string& name, const std::string& value)
    {
        Config::SetDefault(name, StringValue(value));
    }

    void SetGlobal(const std::string& name, const std::string& value)
    {
        GlobalValue::Bind(name, StringValue(value));
    }

    // Nodes 0 .. hosts-1 are hosts, then the switches.
    void AddNodes(uint32_t hosts, uint32_t switches)
    {
        m_hosts = hosts;
        m_nodes.Create(hosts + switches);
        InternetStackHelper stack;
        stack.Install(m_nodes);
        m_routing.resize(hosts + switches);
        for (uint32_t i = 0; i < hosts + switches; ++i)
        {
            Ptr<TableRouting> r = CreateObject<TableRouting>(&m_table, i, i < hosts);
            m_nodes.Get(i)->GetObject<Ipv4>()->SetRoutingProtocol(r);
            m_routing[i] = r;
        }
    }

    // A full-duplex cable; returns its index. Interfaces are numbered per node in cable order.
    int32_t AddCable(uint32_t a, uint32_t b, double bpsAB, double bpsBA, double delayS)
    {
        PointToPointHelper p2p;
        p2p.SetChannelAttribute("Delay", TimeValue(Seconds(delayS)));
        p2p.SetQueue("ns3::DropTailQueue",
                     "MaxSize",
                     QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, m_deviceQueue)));
        NetDeviceContainer devs = p2p.Install(m_nodes.Get(a), m_nodes.Get(b));
        Ptr<PointToPointNetDevice> da = DynamicCast<PointToPointNetDevice>(devs.Get(0));
        Ptr<PointToPointNetDevice> db = DynamicCast<PointToPointNetDevice>(devs.Get(1));
        da->SetDataRate(DataRate(uint64_t(bpsAB)));
        db->SetDataRate(DataRate(uint64_t(bpsBA)));
        for (uint32_t k = 0; k < 2; ++k)
        {
            double bps = k == 0 ? bpsAB : bpsBA;
            TrafficControlHelper tch;
            tch.SetRootQueueDisc("ns3::RedQueueDisc",
                                 "LinkBandwidth",
                                 DataRateValue(DataRate(uint64_t(bps))),
                                 "LinkDelay",
                                 TimeValue(Seconds(delayS)));
            m_queues.Add(tch.Install(devs.Get(k)));
        }
        uint32_t addrA = NodeAddress(a);
        uint32_t addrB = NodeAddress(b);
        uint32_t ia = AddInterface(a, devs.Get(0), addrA);
        uint32_t ib = AddInterface(b, devs.Get(1), addrB);
        m_routing[a]->SetGateway(ia, addrB);
        m_routing[b]->SetGateway(ib, addrA);
        m_devices.push_back(da);
        m_devices.push_back(db);
        m_ifaces.push_back(ia);
        m_ifaces.push_back(ib);
        return int32_t(m_devices.size() / 2 - 1);
    }

    // Every random stream (RED's marking draws, the IP stack's) from `run`, whatever ran in this
    // process before: ns-3 numbers streams from a process-wide counter, so without this a world
    // built after another one would draw different numbers.
    void FixRandomStreams(uint64_t run)
    {
        RngSeedManager::SetSeed(1);
        RngSeedManager::SetRun(run + 1);
        InternetStackHelper stack;
        int64_t next = stack.AssignStreams(m_nodes, 0);
        for (uint32_t i = 0; i < m_queues.GetN(); ++i)
        {
            Ptr<RedQueueDisc> red = DynamicCast<RedQueueDisc>(m_queues.Get(i));
            if (red)
            {
                next += red->AssignStreams(next);
            }
        }
    }

    void SetDeviceQueue(uint32_t packets)
    {
        m_deviceQueue = packets;
    }

    // Interface index of cable c's end at node a (side 0) or b (side 1).
    uint32_t Interface(int32_t cable, uint32_t side) const
    {
        return m_ifaces[2 * cable + side];
    }

    void AddRoute(uint32_t node, uint32_t src, uint32_t dst, uint32_t conn, uint32_t iface)
    {
        m_table.out[RouteKey(node, src, dst, conn)] = iface;
    }

    bool HasRoute(uint32_t node, uint32_t src, uint32_t dst, uint32_t conn) const
    {
        return m_table.out.count(RouteKey(node, src, dst, conn)) > 0;
    }

    // Change the rate of cable c's direction side (0: a->b, 1: b->a) at absolute time t.
    void ScheduleRate(int32_t cable, uint32_t side, double atS, double bps)
    {
        Ptr<PointToPointNetDevice> dev = m_devices[2 * cable + side];
        Simulator::Schedule(Seconds(atS) - Simulator::Now(),
                            &PointToPointNetDevice::SetDataRate,
                            dev,
                            DataRate(uint64_t(bps)));
    }

    // -- flows -------------------------------------------------------------------------------
    int32_t AddFlow(uint32_t src, uint32_t dst, uint32_t conn, uint64_t bytes, int32_t epoch)
    {
        Flow f;
        f.src = src;
        f.dst = dst;
        f.conn = conn;
        f.bytes = bytes;
        f.epoch = epoch;
        f.waiting = 0;
        m_flows.push_back(f);
        int32_t id = int32_t(m_flows.size() - 1);
        if (epoch >= 0)
        {
            m_epochs[epoch].flows.push_back(id);
            m_epochs[epoch].left++;
        }
        Listen(dst, conn);
        return id;
    }

    // `flow` may start only once `before` has ended (both of one epoch).
    void AddDependency(int32_t flow, int32_t before)
    {
        m_flows[before].next.push_back(flow);
        m_flows[flow].waiting++;
    }

    int32_t AddEpoch(bool stop)
    {
        Epoch e;
        e.stop = stop;
        m_epochs.push_back(e);
        return int32_t(m_epochs.size() - 1);
    }

    // `next` starts `gapS` seconds after `epoch` ends (epochs of one batch run back to back).
    void ChainEpochs(int32_t epoch, int32_t next, double gapS)
    {
        m_epochs[epoch].next = next;
        m_epochs[epoch].gap = gapS;
    }

    void StartEpochAt(int32_t epoch, double atS)
    {
        Simulator::Schedule(Seconds(atS) - Simulator::Now(), &World::StartEpoch, this, epoch);
    }

    void StartFlowAt(int32_t flow, double atS)
    {
        Simulator::Schedule(Seconds(atS) - Simulator::Now(), &World::StartFlow, this, flow);
    }

    void StopFlowAt(int32_t flow, double atS)
    {
        Simulator::Schedule(Seconds(atS) - Simulator::Now(), &World::StopFlow, this, flow);
    }

    // Run until an epoch marked `stop` ends (or nothing is left to do); returns the time.
    double Run()
    {
        m_stopped = false;
        Simulator::Run();
        return Simulator::Now().GetSeconds();
    }

    double Now() const
    {
        return Simulator::Now().GetSeconds();
    }

    // -- results -----------------------------------------------------------------------------
    double FlowStart(int32_t f) const
    {
        return m_flows[f].start;
    }

    double FlowEnd(int32_t f) const
    {
        return m_flows[f].end;
    }

    double EpochStart(int32_t e) const
    {
        return m_epochs[e].start;
    }

    double EpochEnd(int32_t e) const
    {
        return m_epochs[e].end;
    }

    uint64_t Forwarded(uint32_t node, uint32_t iface) const
    {
        return m_routing[node]->Forwarded(iface);
    }

    uint64_t RouteMisses() const
    {
        return m_table.misses;
    }

    uint64_t UnknownConnections() const
    {
        return m_unknown;
    }

    uint64_t Drops() const
    {
        uint64_t n = 0;
        for (uint32_t i = 0; i < m_queues.GetN(); ++i)
        {
            n += m_queues.Get(i)->GetStats().nTotalDroppedPackets;
        }
        return n;
    }

    uint64_t Marks() const
    {
        uint64_t n = 0;
        for (uint32_t i = 0; i < m_queues.GetN(); ++i)
        {
            n += m_queues.Get(i)->GetStats().nTotalMarkedPackets;
        }
        return n;
    }

    // The last Run() ended because nothing was left to simulate, not at a batch's end (an
    // unfinished epoch then never ends). Simulator::IsFinished() cannot tell: it is also true
    // after a Stop().
    bool Idle() const
    {
        return !m_stopped;
    }

    uint64_t Events() const
    {
        return Simulator::GetEventCount();
    }

  private:
    uint32_t NodeAddress(uint32_t node)
    {
        if (node < m_hosts)
        {
            return kHostBase + node;
        }
        return kSwitchBase + m_switchAddrs++;
    }

    uint32_t AddInterface(uint32_t node, Ptr<NetDevice> dev, uint32_t addr)
    {
        Ptr<Ipv4> ipv4 = m_nodes.Get(node)->GetObject<Ipv4>();
        uint32_t i = ipv4->AddInterface(dev);
        ipv4->AddAddress(i, Ipv4InterfaceAddress(Ipv4Address(addr), Ipv4Mask("255.0.0.0")));
        ipv4->SetUp(i);
        if (node < m_hosts)
        {
            m_routing[node]->SetOwnAddress(addr);
        }
        return i;
    }

    void Listen(uint32_t host, uint32_t conn)
    {
        uint64_t key = uint64_t(host) * 65536u + conn;
        if (m_listening.count(key))
        {
            return;
        }
        m_listening.insert(key);
        Ptr<Socket> s = Socket::CreateSocket(m_nodes.Get(host), TcpSocketFactory::GetTypeId());
        s->Bind(InetSocketAddress(Ipv4Address::GetAny(), uint16_t(kPortBase + conn)));
        s->Listen();
        s->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const ns3::Address&>(),
                             MakeCallback(&World::Accepted, this));
        m_keep.push_back(s);
    }

    static uint64_t ConnKey(uint64_t src, uint64_t sport, uint64_t dst, uint64_t dport)
    {
        return ((src * 65536u + sport) * 65536u + dst) * 65536u + dport;
    }

    void StartEpoch(int32_t e)
    {
        Epoch& ep = m_epochs[e];
        ep.start = Simulator::Now().GetSeconds();
        if (ep.flows.empty())
        {
            EpochDone(e);
            return;
        }
        std::vector<int32_t> ready;
        for (int32_t f : ep.flows)
        {
            if (m_flows[f].waiting == 0)
            {
                ready.push_back(f);
            }
        }
        for (int32_t f : ready)
        {
            StartFlow(f);
        }
    }

    void StartFlow(int32_t i)
    {
        Flow& f = m_flows[i];
        f.start = Simulator::Now().GetSeconds();
        Ptr<Socket> s = Socket::CreateSocket(m_nodes.Get(f.src), TcpSocketFactory::GetTypeId());
        s->Bind();
        ns3::Address local;
        s->GetSockName(local);
        uint16_t sport = InetSocketAddress::ConvertFrom(local).GetPort();
        m_byConn[ConnKey(f.src, sport, f.dst, kPortBase + f.conn)] = i;
        m_txFlow[PeekPointer(s)] = i;
        f.tx = s;
        s->SetConnectCallback(MakeCallback(&World::Connected, this),
                              MakeCallback(&World::ConnectFailed, this));
        s->Connect(InetSocketAddress(Ipv4Address(kHostBase + f.dst), uint16_t(kPortBase + f.conn)));
    }

    void StopFlow(int32_t i)
    {
        Flow& f = m_flows[i];
        if (f.tx && !f.closed)
        {
            f.closed = true;
            f.end = Simulator::Now().GetSeconds();
            f.tx->Close();
        }
    }

    void Connected(Ptr<Socket> s)
    {
        s->SetSendCallback(MakeCallback(&World::SendSpace, this));
        SendSpace(s, 0);
    }

    void ConnectFailed(Ptr<Socket> s)
    {
        NS_FATAL_ERROR("react_ns3: a TCP connection failed (SYN retries exhausted)");
    }

    void SendSpace(Ptr<Socket> s, uint32_t)
    {
        auto it = m_txFlow.find(PeekPointer(s));
        if (it != m_txFlow.end())
        {
            Fill(it->second);
        }
    }

    void Fill(int32_t i)
    {
        Flow& f = m_flows[i];
        if (f.closed)
        {
            return;
        }
        Ptr<Socket> s = f.tx;
        while (f.bytes == 0 || f.sent < f.bytes)
        {
            uint64_t room = s->GetTxAvailable();
            if (room == 0)
            {
                break;
            }
            uint64_t n = f.bytes == 0 ? room : std::min<uint64_t>(room, f.bytes - f.sent);
            int sent = s->Send(Create<Packet>(uint32_t(n)));
            if (sent <= 0)
            {
                break;
            }
            f.sent += uint64_t(sent);
        }
        if (f.bytes != 0 && f.sent >= f.bytes)
        {
            f.closed = true;
            s->Close();
        }
    }

    void Accepted(Ptr<Socket> s, const ns3::Address& from)
    {
        InetSocketAddress peer = InetSocketAddress::ConvertFrom(from);
        ns3::Address me;
        s->GetSockName(me);
        InetSocketAddress mine = InetSocketAddress::ConvertFrom(me);
        uint64_t key = ConnKey(peer.GetIpv4().Get() - kHostBase,
                               peer.GetPort(),
                               mine.GetIpv4().Get() - kHostBase,
                               mine.GetPort());
        auto it = m_byConn.find(key);
        if (it == m_byConn.end())
        {
            m_unknown++;
            return;
        }
        m_rxFlow[PeekPointer(s)] = it->second;
        m_byConn.erase(it);
        s->SetRecvCallback(MakeCallback(&World::Received, this));
        m_keep.push_back(s);
    }

    void Received(Ptr<Socket> s)
    {
        int32_t i = m_rxFlow[PeekPointer(s)];
        Flow& f = m_flows[i];
        Ptr<Packet> p;
        while ((p = s->Recv()))
        {
            if (p->GetSize() == 0)
            {
                break;
            }
            f.received += p->GetSize();
        }
        if (f.bytes != 0 && f.received >= f.bytes && f.end < 0)
        {
            f.end = Simulator::Now().GetSeconds();
            s->Close();
            FlowDone(i);
        }
    }

    void FlowDone(int32_t i)
    {
        Flow& f = m_flows[i];
        m_txFlow.erase(PeekPointer(f.tx));
        f.tx = nullptr;
        for (int32_t j : f.next)
        {
            if (--m_flows[j].waiting == 0)
            {
                StartFlow(j);
            }
        }
        if (f.epoch >= 0 && --m_epochs[f.epoch].left == 0)
        {
            EpochDone(f.epoch);
        }
    }

    void EpochDone(int32_t e)
    {
        Epoch& ep = m_epochs[e];
        ep.end = Simulator::Now().GetSeconds();
        if (ep.next >= 0)
        {
            Simulator::Schedule(Seconds(ep.gap), &World::StartEpoch, this, ep.next);
        }
        if (ep.stop)
        {
            m_stopped = true;
            Simulator::Stop();
        }
    }

    NodeContainer m_nodes;
    uint32_t m_hosts = 0;
    uint32_t m_switchAddrs = 0;
    uint32_t m_deviceQueue = 1;
    RouteTable m_table;
    std::vector<Ptr<TableRouting>> m_routing;
    std::vector<Ptr<PointToPointNetDevice>> m_devices; // 2 per cable: a's end, b's end
    std::vector<uint32_t> m_ifaces;
    QueueDiscContainer m_queues;
    std::vector<Flow> m_flows;
    std::vector<Epoch> m_epochs;
    std::set<uint64_t> m_listening;
    std::unordered_map<uint64_t, int32_t> m_byConn; // sender 4-tuple -> flow, until accepted
    std::unordered_map<Socket*, int32_t> m_txFlow;
    std::unordered_map<Socket*, int32_t> m_rxFlow;
    std::vector<Ptr<Socket>> m_keep;
    uint64_t m_unknown = 0;
    bool m_stopped = false;
};

} // namespace react_ns3
