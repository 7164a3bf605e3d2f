package actors

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A stopped actor sends nothing more to its own name. Its timers (a
// device's 50 ms tick, a job's retry, the coordinator's elastic tick) and
// background work (a device's plan) sent to its PID after it stopped, and
// a PID whose actor stopped is resolved by name: the message went to the
// next actor spawned under that name in the process, even while
// protoactor was still setting up that actor's mailbox (it registers the
// name first), a data race the race detector reported in
// cmd/coordinator's demo tests (a node of the next demo spawning its
// devices as the last demo's device ticked) and a nil dispatcher if the
// send won. Here a node is stopped and an actor takes its device's name
// at once: it gets nothing in 6 ticks.
func TestStoppedDeviceSendsNothingToItsName(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 1000)
	n := tc.nodes[0]
	tc.nodes = nil
	id := n.DevicePID(0).Id
	n.Kill()
	got := make(chan string, 16)
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started, *actor.Stopping, *actor.Stopped:
		default:
			select {
			case got <- fmt.Sprintf("%T", ctx.Message()):
			default:
			}
		}
	})
	sys := n.actors.System
	pid, err := sys.Root.SpawnNamed(props, id)
	if err != nil {
		t.Fatalf("spawn an actor named %s after the node stopped: %v", id, err)
	}
	defer func() { _ = sys.Root.StopFuture(pid).Wait() }()
	select {
	case m := <-got:
		t.Fatalf("the actor now named %s got a %s from the stopped device", id, m)
	case <-time.After(6 * 50 * time.Millisecond):
	}
}
