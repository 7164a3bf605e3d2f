package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Member roles.
const (
	RoleCoordinator = "coordinator"
	RoleNode        = "node"
)

// Meta is what each member gossips about itself.
type Meta struct {
	Name       string `json:"name"`
	Role       string `json:"role"`
	Address    string `json:"addr"` // protoactor remote address
	GPUs       int    `json:"gpus"`
	DeviceType string `json:"type"`
	// Instance tells this process from an earlier or later one of the same
	// name: StartGossip gives each member a new one unless set. A member
	// whose instance changes was restarted (see NotifyUpdate). Metadata
	// without one (an older version's) is of an unknown instance, never
	// taken for a restart.
	Instance string `json:"instance,omitempty"`
	// TLS says the member's actor port requires mutual TLS (WithTLS). A
	// coordinator ignores a node whose setting differs from its own: the
	// two could not reach each other's actors.
	TLS bool `json:"tls,omitempty"`
}

// NewInstance returns a new random instance identity (see Meta.Instance).
func NewInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return hex.EncodeToString(b[:])
}

// MemberEvent is a membership change: type is joined, suspect, dead, left
// (or "alive" when a suspect member recovers).
type MemberEvent struct {
	Type string
	Meta Meta
	Addr string // gossip address
}

// GossipOptions configure a gossip member.
type GossipOptions struct {
	// Listen is the gossip bind address, host:port (UDP and TCP); port 0 picks one.
	Listen string
	// Advertise is the IP address peers are told to reach this member at
	// (with the bound port); "" advertises the Listen host.
	Advertise string
	// Join lists seed members to join (host:port); empty starts a new cluster.
	Join []string
	// Cluster names the cluster ("" is DefaultCluster). Every gossip
	// packet and stream carries it, and a member drops those of another
	// cluster: two clusters on one network never merge, and a member that
	// took a port a stopped member of another cluster used is not told
	// that cluster's news (such as its own name's death).
	Cluster string
	// SecretKey encrypts and authenticates all gossip (AES-GCM; 16, 24 or
	// 32 bytes; nil: plaintext). Members with another key, or none, cannot
	// join: memberlist drops what it cannot decrypt.
	SecretKey []byte
	Meta      Meta
	// OnEvent receives membership changes (from a gossip goroutine; must not block long).
	OnEvent func(MemberEvent)
	Log     *slog.Logger

	// onNotice, in tests, runs before a leave notice is recorded.
	onNotice func()
}

// Gossip is this process's membership in the cluster.
type Gossip struct {
	ml   *memberlist.Memberlist
	meta []byte
	opts GossipOptions
	stop chan struct{}
	wg   sync.WaitGroup
	// life serialises Leave and Shutdown: memberlist panics when asked to
	// leave after it has been shut down.
	life sync.Mutex

	events chan MemberEvent // delivered to OnEvent by one goroutine
	acks   chan string      // peers that answered this member's leave notice

	// probe and probeTimeout are the member list's probe interval and
	// timeout, from which watchSuspects derives when a peer is overdue.
	probe, probeTimeout time.Duration

	// order serialises the membership reports (NotifyJoin, NotifyLeave,
	// NotifyUpdate) with checkSuspects' judging and reporting, so that no
	// report falls between a peer's judgement and its suspect or alive
	// report: a suspicion of a process that restarted, reported after the
	// new one's join, would take the new one out of service with nothing
	// to bring it back (its heard and suspect were reset by the join).
	order sync.Mutex

	mu sync.Mutex
	// suspect holds the peers judged suspect, each with when it was last
	// heard as it became so: it is alive again only once heard after that.
	suspect map[string]time.Time
	leaving map[string]time.Time // members that announced a graceful leave, and when
	heard   map[string]time.Time // a peer's last answered probe (or when it was first seen)
	// span is, per peer, the most peers there were since it was last heard:
	// the probe round it is waiting in was that long, so a member leaving
	// meanwhile does not shorten its allowance (see judge).
	span map[string]int
	// checked is when watchSuspects last checked the peers (see resume).
	checked time.Time
	// known holds each live peer as last reported joined or updated (a
	// copy: memberlist updates its own in place), so that when a restart
	// replaces it the old process's death can be reported with its
	// metadata and address.
	known map[string]memberlist.Node
	// successor holds, per live peer, a new process of its name that
	// gossiped from another address (see NotifyConflict): contacted as soon
	// as the peer is gone.
	successor map[string]memberlist.Node
}

// leaveNotice prefixes the user message a member sends before leaving:
// memberlist reports both departures through NotifyLeave without telling
// them apart, so a graceful leave is announced explicitly.
const leaveNotice = "gpusched-leave:"

// leaveAck prefixes a peer's answer to a leave notice, sent once it has
// recorded the notice: the leaver departs only after the answers (or its
// wait runs out), so its departure, which comes by UDP gossip, cannot be
// handled before the notice, which comes over TCP, and be taken for a death.
const leaveAck = "gpusched-leave-ack:"

// LANConfig is memberlist's LAN configuration tuned so a dead member is
// declared within about 2-3 s (well under 5 s): probe every 500 ms with a
// 200 ms timeout, and a suspicion timeout of 3 probe intervals that does not
// stretch while waiting for confirmations (small clusters have few peers to
// confirm a suspicion).
func LANConfig() *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.ProbeInterval = 500 * time.Millisecond
	c.ProbeTimeout = 200 * time.Millisecond
	c.SuspicionMult = 3
	c.SuspicionMaxTimeoutMult = 1
	c.GossipInterval = 100 * time.Millisecond
	c.PushPullInterval = 10 * time.Second
	c.TCPTimeout = 2 * time.Second
	return c
}

// deadNodeReclaim is how long after a member is declared dead (or left)
// memberlist lets a process of its name at another address take its place:
// at once, since that is a restart (see NotifyConflict). With memberlist's
// default, 0, the name stays the dead process's until it is dropped from
// the member list (GossipToTheDeadTime, 30 s).
const deadNodeReclaim = time.Nanosecond

// DefaultCluster is GossipOptions.Cluster's default.
const DefaultCluster = "gpusched"

// CheckClusterName says what is wrong with a cluster name, if anything: 1 to
// 64 letters, digits, '.', '_' or '-'.
func CheckClusterName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("cluster name %q: want 1 to 64 characters (e.g. gpusched or lab-a)", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("cluster name %q: %q is not allowed; use letters, digits, '.', '_' and '-' (e.g. lab-a)", name, r)
		}
	}
	return nil
}

// StartGossip creates the member, and joins the seeds if any.
func StartGossip(o GossipOptions) (*Gossip, error) {
	if o.Cluster == "" {
		o.Cluster = DefaultCluster
	}
	if err := CheckClusterName(o.Cluster); err != nil {
		return nil, fmt.Errorf("gossip: %w", err)
	}
	if o.SecretKey != nil {
		if err := memberlist.ValidateKey(o.SecretKey); err != nil {
			return nil, fmt.Errorf("gossip: the key is %d bytes; want 16, 24 or 32", len(o.SecretKey))
		}
	}
	host, portStr, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("gossip: bad listen address %q: %w", o.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("gossip: bad port in %q", o.Listen)
	}
	if o.Meta.Instance == "" {
		o.Meta.Instance = NewInstance()
	}
	meta, err := json.Marshal(o.Meta)
	if err != nil {
		return nil, err
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("gossip: metadata is %d bytes, limit %d", len(meta), memberlist.MetaMaxSize)
	}
	g := &Gossip{meta: meta, opts: o, stop: make(chan struct{}), events: make(chan MemberEvent, 1024), acks: make(chan string, 64), suspect: map[string]time.Time{}, leaving: map[string]time.Time{}, heard: map[string]time.Time{}, span: map[string]int{}, known: map[string]memberlist.Node{}, successor: map[string]memberlist.Node{}}
	c := LANConfig()
	c.Name = o.Meta.Name
	c.BindAddr = host
	c.BindPort = port
	c.AdvertisePort = port
	c.AdvertiseAddr = o.Advertise
	c.Label = o.Cluster
	c.Delegate = g
	c.Events = g
	c.Ping = g
	c.Conflict = g
	c.DeadNodeReclaimTime = deadNodeReclaim
	if o.SecretKey != nil {
		c.SecretKey = o.SecretKey
		c.GossipVerifyIncoming, c.GossipVerifyOutgoing = true, true
	}
	g.probe, g.probeTimeout = c.ProbeInterval, c.ProbeTimeout
	c.Logger = log.New(io.Discard, "", 0)
	if o.Log != nil && o.Log.Enabled(context.Background(), slog.LevelDebug) {
		c.Logger = slog.NewLogLogger(o.Log.Handler(), slog.LevelDebug)
	}
	ml, err := memberlist.Create(c)
	if err != nil {
		return nil, &ListenError{What: "gossip", Addr: o.Listen, Err: err}
	}
	g.ml = ml
	if len(o.Join) > 0 {
		if _, err := ml.Join(o.Join); err != nil {
			_ = ml.Shutdown()
			return nil, fmt.Errorf("gossip: cannot join %v as a member of cluster %q: %w (is the coordinator's --gossip address right, and do its --cluster and --gossip-key-file match? %s)", o.Join, o.Cluster, err, keyHint(o.SecretKey))
		}
	}
	g.wg.Add(2)
	go g.watchSuspects()
	go g.deliver()
	return g, nil
}

// Addr is the gossip address (host:port) others join.
func (g *Gossip) Addr() string {
	n := g.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Members returns the metadata of every live (alive or suspect) member.
func (g *Gossip) Members() []Meta {
	var out []Meta
	for _, n := range g.ml.Members() {
		var m Meta
		if json.Unmarshal(n.Meta, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// Join contacts more members (e.g. nodes known from before a restart).
func (g *Gossip) Join(addrs []string) (int, error) { return g.ml.Join(addrs) }

// NumMembers is the number of live members, this one included.
func (g *Gossip) NumMembers() int { return g.ml.NumMembers() }

// Leave announces a graceful departure and stops gossiping. A member that
// has already stopped (Leave or Shutdown) gets an error.
func (g *Gossip) Leave(timeout time.Duration) error {
	g.life.Lock()
	defer g.life.Unlock()
	select {
	case <-g.stop:
		return fmt.Errorf("gossip: member %s has already stopped; it cannot leave again", g.opts.Meta.Name)
	default:
	}
	// Half the time waits for the peers to record the notice, the rest
	// for the departure to be gossiped.
	start := time.Now()
	waitFor := map[string]bool{}
	for _, n := range g.ml.Members() {
		if n.Name != g.opts.Meta.Name && g.ml.SendReliable(n, g.leaveNoticeMsg()) == nil {
			waitFor[n.Name] = true
		}
	}
	t := time.NewTimer(timeout / 2)
	defer t.Stop()
	for len(waitFor) > 0 {
		select {
		case name := <-g.acks:
			delete(waitFor, name)
		case <-t.C:
			g.log().Warn("gossip: leaving before every peer recorded the leave notice; they may report this member dead", "member", g.opts.Meta.Name, "unanswered", len(waitFor))
			clear(waitFor)
		}
	}
	err := g.ml.Leave(max(timeout-time.Since(start), timeout/2))
	g.shutdown()
	return err
}

// Shutdown stops gossiping without announcing it (peers will declare this
// member dead).
func (g *Gossip) Shutdown() {
	g.life.Lock()
	defer g.life.Unlock()
	g.shutdown()
}

func (g *Gossip) shutdown() {
	select {
	case <-g.stop:
		return
	default:
	}
	close(g.stop)
	g.wg.Wait()
	_ = g.ml.Shutdown()
}

// watchSuspects marks a peer suspect when this member's probes of it have
// gone unanswered for longer than two probe rounds, and alive again when
// one is answered. memberlist keeps its own suspicion private (the state
// in the Node it hands out is never updated), so suspicion is judged here
// from the probe answers it reports through the ping delegate. A peer the
// member list declares dead within that time is reported dead without a
// suspect event first.
func (g *Gossip) watchSuspects() {
	defer g.wg.Done()
	t := time.NewTicker(checkEvery)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case now := <-t.C:
			g.checkSuspects(now)
		}
	}
}

// overdue reports whether a peer last heard at heard is overdue at now,
// in a cluster of peers other members: the member list probes one member
// per interval, in a shuffled round, so a live peer answers at least once
// in two rounds.
func overdue(now, heard time.Time, peers int, probe, timeout time.Duration) bool {
	return now.Sub(heard) > 2*time.Duration(max(peers, 1))*probe+timeout
}

// checkEvery is how often watchSuspects checks the peers.
const checkEvery = 100 * time.Millisecond

// resume credits the peers with the time this member itself stood still. A
// check that comes much later than checkEvery after the one before means
// the member's goroutines did not run meanwhile (its process was
// descheduled, stopped or starved): it neither probed its peers nor read
// their answers, so that time is no silence of theirs, and a peer's
// allowance counts only the time the member ran. Without it a member that
// stalled for longer than a peer's allowance (1.2 s with one peer) judged
// its peers suspect on resuming, before its first probe could be answered:
// under load the coordinator took a live node's GPUs out of service. A
// peer already suspect is given nothing: it stays so until it answers.
func (g *Gossip) resume(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	last := g.checked
	g.checked = now
	if last.IsZero() {
		return
	}
	stall := now.Sub(last) - checkEvery
	if stall <= g.probeTimeout { // scheduling jitter, not a stall
		return
	}
	for name, heard := range g.heard {
		if _, suspect := g.suspect[name]; !suspect && heard.Before(last) {
			g.heard[name] = heard.Add(stall)
		}
	}
}

func (g *Gossip) checkSuspects(now time.Time) {
	g.resume(now)
	// Only names are taken from the member list (before order: its
	// reports come with memberlist's lock held); a peer's metadata, which
	// memberlist may replace meanwhile, is read from known.
	var names []string
	for _, n := range g.ml.Members() {
		if n.Name != g.opts.Meta.Name {
			names = append(names, n.Name)
		}
	}
	g.order.Lock()
	defer g.order.Unlock()
	for i, ch := range g.judge(now, names) {
		switch ch {
		case EvSuspect, EvAlive:
			g.mu.Lock()
			n, ok := g.known[names[i]]
			g.mu.Unlock()
			if ok {
				g.emit(ch, &n)
			}
		}
	}
}

// judge decides, for each of the peers (names) at now, whether it is
// overdue, and returns per peer EvSuspect when it has just become so,
// EvAlive when it has just stopped being so, and "" otherwise. A peer is
// given the allowance of the largest cluster since it was last heard: when
// a member leaves, a peer last heard in a longer round is not overdue at
// once by the shorter round's measure (with two peers, one leaving made
// the other suspect 71 ms later).
func (g *Gossip) judge(now time.Time, names []string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, len(names))
	for i, name := range names {
		heard, ok := g.heard[name]
		if !ok {
			heard = now
			g.heard[name] = now
		}
		span := max(g.span[name], len(names))
		g.span[name] = span
		since, was := g.suspect[name]
		// A suspect peer stays suspect until it answers: a member joining
		// lengthens the allowance but is no answer from it.
		is := overdue(now, heard, span, g.probe, g.probeTimeout) || (was && !heard.After(since))
		switch {
		case is && !was:
			g.suspect[name] = heard
			out[i] = EvSuspect
		case was && !is:
			delete(g.suspect, name)
			out[i] = EvAlive
		}
	}
	return out
}

// AckPayload implements memberlist.PingDelegate.
func (g *Gossip) AckPayload() []byte { return nil }

// NotifyPingComplete implements memberlist.PingDelegate: other answered a
// probe.
func (g *Gossip) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	g.mu.Lock()
	g.heard[other.Name] = time.Now()
	delete(g.span, other.Name) // its next round is the cluster's size from now on
	g.mu.Unlock()
}

func (g *Gossip) emit(typ string, n *memberlist.Node) {
	if g.opts.OnEvent == nil || n.Name == g.opts.Meta.Name {
		return
	}
	log := g.log()
	var m Meta
	if err := json.Unmarshal(n.Meta, &m); err != nil {
		// Garbage, or another version's: whatever fields did decode are
		// passed on for OnEvent to check.
		log.Warn("gossip: cannot read a member's metadata", "member", n.Name, "addr", n.Address(), "event", typ, "err", err)
	}
	if m.Name != "" && m.Name != n.Name {
		// Metadata that names another member would pass this member's
		// events (joined, dead) off as that member's: only its own name is
		// passed on, with no role, so it is not taken for a node.
		log.Warn("gossip: a member's metadata names another member; ignoring its metadata (a member's \"name\" must be its gossip name)",
			"member", n.Name, "meta_name", m.Name, "addr", n.Address(), "event", typ)
		m = Meta{}
	}
	if m.Name == "" {
		m.Name = n.Name
	}
	// memberlist calls the event delegate with its member lock held: hand
	// the event to the delivery goroutine so OnEvent may call back into
	// the member list.
	select {
	case g.events <- MemberEvent{Type: typ, Meta: m, Addr: n.Address()}:
	case <-g.stop:
	}
}

func (g *Gossip) log() *slog.Logger {
	if g.opts.Log != nil {
		return g.opts.Log
	}
	return slog.Default()
}

func (g *Gossip) deliver() {
	defer g.wg.Done()
	for {
		select {
		case e := <-g.events:
			g.opts.OnEvent(e)
		case <-g.stop:
			return
		}
	}
}

// NodeMeta implements memberlist.Delegate.
func (g *Gossip) NodeMeta(limit int) []byte { return g.meta }

// NotifyMsg implements memberlist.Delegate.
func (g *Gossip) NotifyMsg(b []byte) {
	if s := string(b); strings.HasPrefix(s, leaveNotice) {
		if g.opts.onNotice != nil {
			g.opts.onNotice()
		}
		name, addr, _ := strings.Cut(strings.TrimPrefix(s, leaveNotice), "@")
		g.mu.Lock()
		g.leaving[name] = time.Now()
		g.mu.Unlock()
		// Answer once recorded (NotifyMsg runs on the notice's TCP
		// stream, outside memberlist's locks). A member that leaves right
		// after joining may not be among ours yet (its join's push-pull
		// returns to it before we merge it): it is answered at the
		// address its notice gives.
		to := (*memberlist.Node)(nil)
		for _, n := range g.ml.Members() {
			if n.Name == name {
				to = n
			}
		}
		if to == nil && addr != "" {
			if host, port, err := net.SplitHostPort(addr); err == nil {
				if p, err := strconv.Atoi(port); err == nil {
					to = &memberlist.Node{Name: name, Addr: net.ParseIP(host), Port: uint16(p)}
				}
			}
		}
		if to != nil && to.Addr != nil {
			_ = g.ml.SendReliable(to, []byte(leaveAck+g.opts.Meta.Name))
		}
	} else if strings.HasPrefix(s, leaveAck) {
		select {
		case g.acks <- strings.TrimPrefix(s, leaveAck):
		default:
		}
	}
}

// GetBroadcasts implements memberlist.Delegate.
func (g *Gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate.
func (g *Gossip) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (g *Gossip) MergeRemoteState(buf []byte, join bool) {}

// leaveNoticeMsg is the notice this member sends before leaving: its name
// and gossip address (so a peer that has not merged its join yet can
// answer).
func (g *Gossip) leaveNoticeMsg() []byte {
	return []byte(leaveNotice + g.opts.Meta.Name + "@" + g.Addr())
}

// staleNotice is how old a leave notice must be for a join of its member to
// drop it: a notice can overtake the join it follows, but a member that
// rejoins after announcing a leave it did not carry out is not leaving.
const staleNotice = 10 * time.Second

// NotifyJoin implements memberlist.EventDelegate.
func (g *Gossip) NotifyJoin(n *memberlist.Node) {
	g.order.Lock()
	defer g.order.Unlock()
	g.joined(n)
}

// joined reports member n joined.
func (g *Gossip) joined(n *memberlist.Node) {
	g.mu.Lock()
	if at, ok := g.leaving[n.Name]; ok && time.Since(at) > staleNotice {
		delete(g.leaving, n.Name)
	}
	g.heard[n.Name] = time.Now()
	delete(g.span, n.Name)
	g.known[n.Name] = copyNode(n)
	delete(g.successor, n.Name)
	g.mu.Unlock()
	g.emit(EvJoined, n)
}

// NotifyLeave implements memberlist.EventDelegate: dead or left.
func (g *Gossip) NotifyLeave(n *memberlist.Node) {
	g.order.Lock()
	defer g.order.Unlock()
	g.gone(n)
}

// gone reports member n dead, or left if it announced a leave.
func (g *Gossip) gone(n *memberlist.Node) {
	g.mu.Lock()
	delete(g.suspect, n.Name)
	delete(g.heard, n.Name)
	delete(g.span, n.Name)
	delete(g.known, n.Name)
	succ, ok := g.successor[n.Name]
	delete(g.successor, n.Name)
	// A member that leaves gracefully announces it (see Leave); the Node
	// memberlist hands over does not say whether it left or died.
	_, left := g.leaving[n.Name]
	delete(g.leaving, n.Name)
	g.mu.Unlock()
	if left {
		g.emit(EvLeft, n)
	} else {
		g.emit(EvDead, n)
	}
	if ok && restarted(n.Meta, succ.Meta) {
		// memberlist would take the new process only when it next
		// gossips its state to this member (a push-pull, up to 10 s
		// away, and none with it): ask for it now. The push-pull also
		// tells it that its name was declared dead at the old process's
		// incarnation, which it refutes with a higher one, after which
		// late news of the old process (a peer's suspicion or death of
		// it) cannot take the new one out. Until that refutation arrives
		// (a gossip round, ~100 ms: the push-pull's answer has the new
		// process's own, possibly lower, incarnation), another peer's
		// own declaration of the old one's death could: the new one would
		// be reported dead and joined again. memberlist's lock is held
		// here.
		go g.rejoin(n.Name, succ.Address())
	}
}

// rejoin contacts the new process of member name at addr (see gone).
func (g *Gossip) rejoin(name, addr string) {
	select {
	case <-g.stop:
		return
	default:
	}
	if _, err := g.ml.Join([]string{addr}); err != nil {
		g.log().Warn("gossip: cannot reach the new process of a member that was declared dead; it joins when it next gossips", "member", name, "addr", addr, "err", err)
	}
}

// NotifyConflict implements memberlist.ConflictDelegate: other gossips
// that it is member existing at another address. memberlist ignores it
// while existing lives. A different instance there is a restart of
// existing (at another gossip address, e.g. with --gossip port 0): it is
// remembered, and contacted as soon as existing is declared dead (see
// gone), which then reclaims the name at once (deadNodeReclaim). Before,
// the new process was taken only once memberlist dropped the dead name,
// 30-40 s later. A conflict about this member itself (a peer still lists
// its previous process) is left to memberlist.
func (g *Gossip) NotifyConflict(existing, other *memberlist.Node) {
	if existing.Name == g.opts.Meta.Name || !restarted(existing.Meta, other.Meta) {
		return
	}
	g.mu.Lock()
	prev, had := g.successor[other.Name]
	g.successor[other.Name] = copyNode(other)
	g.mu.Unlock()
	if !had || instanceOf(prev.Meta) != instanceOf(other.Meta) || prev.Address() != other.Address() {
		// A second live process given the same name looks the same: it
		// stays out while the first lives, as before.
		g.log().Info("gossip: another process gossips as a member from another address (a restart, or a second node of that name); it takes the name once the old process is declared dead",
			"member", other.Name, "old_addr", existing.Address(), "addr", other.Address(), "old_instance", instanceOf(existing.Meta), "instance", instanceOf(other.Meta))
	}
}

// NotifyUpdate implements memberlist.EventDelegate: a live member's
// metadata changed. A member's metadata never changes while its process
// runs, so it comes from a new process of the same name, when that one
// (restarted at the same gossip address, e.g. by a supervisor) joined
// before the old one was declared dead: memberlist takes the new one's
// alive message (it refutes the old one's, so its incarnation is higher)
// for the same member's, and does not report it as a departure and a
// join. (When the old one was declared dead first, the new one comes as a
// join, as any rejoin does.) When the instance changed, the old process is
// reported dead (or left, had it announced a leave) with its own
// metadata, then the new one joined, so that consumers run their usual
// death path (e.g. the coordinator re-queues the old process's jobs) and
// then register the new one afresh. The old process's gossip cannot bring
// it back: its alive messages, whether late or relayed by a peer that has
// not heard of the restart, carry a lower incarnation than the new one's
// refutation, which memberlist ignores. A metadata change without two
// known instances (an older version's peer) is not reported, as before.
//
// A restart at another gossip address is no update: memberlist refuses
// the new address while the old member lives ("conflicting address"),
// and declares the old one dead when it stops answering probes (the usual
// death, within about 2.5 s); see NotifyConflict for how the new one then
// joins.
func (g *Gossip) NotifyUpdate(n *memberlist.Node) {
	g.order.Lock()
	defer g.order.Unlock()
	g.mu.Lock()
	old, ok := g.known[n.Name]
	restart := ok && restarted(old.Meta, n.Meta)
	if ok && !restart {
		g.known[n.Name] = copyNode(n)
	}
	g.mu.Unlock()
	if !restart {
		return
	}
	g.log().Info("gossip: member restarted under the same name; reporting its previous process gone",
		"member", n.Name, "addr", n.Address(), "old_instance", instanceOf(old.Meta), "instance", instanceOf(n.Meta))
	g.gone(&old)
	g.joined(n)
}

// restarted reports whether metadata now comes from another process than
// metadata old did: both name an instance, and not the same one.
func restarted(old, now []byte) bool {
	a, b := instanceOf(old), instanceOf(now)
	return a != "" && b != "" && a != b
}

// instanceOf is the instance metadata names ("" for none or unreadable).
func instanceOf(meta []byte) string {
	var m struct {
		Instance string `json:"instance"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return ""
	}
	return m.Instance
}

// copyNode copies n, its metadata included.
func copyNode(n *memberlist.Node) memberlist.Node {
	c := *n
	c.Addr = slices.Clone(n.Addr)
	c.Meta = slices.Clone(n.Meta)
	return c
}

// keyHint says whether this member encrypts its gossip, for a join error.
func keyHint(key []byte) string {
	if key == nil {
		return "this member has no gossip key: it cannot join a cluster that has one"
	}
	return "this member encrypts its gossip: it cannot join a cluster with another key, or none"
}
