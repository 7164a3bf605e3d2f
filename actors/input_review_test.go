package actors

import (
	"testing"
	"time"

	"github.com/gpusched/gpusched/transport"
)

// A stored job record that cannot be decoded (garbled in the store, or
// written by another version) is skipped at recovery, and its job number
// was forgotten with it: when it was the highest, the next submission took
// its id and overwrote the record of a job already accepted. Job numbers
// now continue after every stored key, and the garbled record is kept.
func TestRecoveryNumbersAfterGarbledRecord(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 3)
	a := tc.submit(mlpSpec("a", 10, 0))[0].ID
	b := tc.submit(mlpSpec("b", 10, 0))[0].ID
	tc.waitState(a, StateCompleted, 40*time.Second)
	tc.waitState(b, StateCompleted, 40*time.Second)
	st, err := transport.OpenStore(tc.nc)
	if err != nil {
		t.Fatal(err)
	}
	const garbled = `{"id": "j-2", "seq": "tw`
	if err := st.Put(JobKey(b), []byte(garbled)); err != nil {
		t.Fatal(err)
	}
	tc.restartCoordinator()
	if c := tc.submit(mlpSpec("c", 10, 0))[0].ID; c == a || c == b {
		t.Fatalf("new job got %s, the id of a stored job (a %s, b %s)", c, a, b)
	}
	st, err = transport.OpenStore(tc.nc)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(JobKey(b)); err != nil || string(got) != garbled {
		t.Fatalf("b's stored record is now %q (%v); want it left as it was", got, err)
	}
}
