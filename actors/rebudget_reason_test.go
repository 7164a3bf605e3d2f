package actors

import "testing"

// The reason a device re-budgets after jobs finish lists their ids in
// words ("job j-7 completed", "jobs j-7 and j-9 completed"), not as a Go
// slice ("job(s) [j-7] completed"), since watch and demo print it as is.
func TestCompletedReasonIsWords(t *testing.T) {
	for _, c := range []struct {
		ids  []string
		want string
	}{
		{[]string{"j-7"}, "job j-7 completed"},
		{[]string{"j-7", "j-9"}, "jobs j-7 and j-9 completed"},
		{[]string{"j-1", "j-2", "j-3"}, "jobs j-1, j-2 and j-3 completed"},
	} {
		if got := completedReason(c.ids); got != c.want {
			t.Errorf("completedReason(%v) = %q, want %q", c.ids, got, c.want)
		}
	}
}

// A job that left is named with its reason's headline, not the whole
// nested reason its own event carries.
func TestLeftReasonIsTheHeadline(t *testing.T) {
	for _, c := range []struct{ id, reason, want string }{
		{"j-12", "requeued: starved on node-2/gpu0 (a higher-priority job there leaves its kernels no gap); moved to a GPU where no job outranks it", "job j-12 left (requeued)"},
		{"j-3", "moved to n2/gpu0,n2/gpu1", "job j-3 left (moved to n2/gpu0,n2/gpu1)"},
		{"j-4", "cancelled", "job j-4 left (cancelled)"},
		{"j-5", "", "job j-5 left (released)"},
	} {
		if got := leftReason(c.id, c.reason); got != c.want {
			t.Errorf("leftReason(%q, %q) = %q, want %q", c.id, c.reason, got, c.want)
		}
	}
}
