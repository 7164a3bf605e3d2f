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
