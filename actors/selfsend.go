package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// selfSends delivers an actor's messages to itself from other goroutines
// (its timers and background work) until the actor stops. A message sent
// to the PID of a stopped actor is resolved by name, so it reaches the next
// actor spawned under that name in the process (a node's device after the
// node restarts, a job actor after the coordinator's restart, a coordinator
// started again in the same process), and it can reach that actor while
// protoactor is still setting up its mailbox: protoactor registers the
// name before the mailbox's handlers, a data race, and a nil dispatcher
// if the send comes first. The zero value sends; stop, called when the
// actor handles *actor.Stopping (before its name is released), waits for a
// send in progress and drops every later one.
type selfSends struct {
	mu      sync.Mutex
	stopped bool
}

// send sends msg to self unless the actor has stopped.
func (s *selfSends) send(sys *actor.ActorSystem, self *actor.PID, msg any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		sys.Root.Send(self, msg)
	}
}

// after sends msg to the actor of ctx after d, unless it has stopped.
func (s *selfSends) after(ctx actor.Context, d time.Duration, msg any) {
	sys, self := ctx.ActorSystem(), ctx.Self()
	time.AfterFunc(d, func() { s.send(sys, self, msg) })
}

// stop drops every send from now on.
func (s *selfSends) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}
