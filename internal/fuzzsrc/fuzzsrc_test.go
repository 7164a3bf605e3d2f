package fuzzsrc

import "testing"

// TestSourceBytesFirstThenStream: the input's bytes are the first choices,
// then a stream that is the same for the same input.
func TestSourceBytesFirstThenStream(t *testing.T) {
	a, b := New(7, []byte{3, 200}), New(7, []byte{3, 200})
	if got := a.Byte(); got != 3 {
		t.Fatalf("first choice %d, want the input's first byte 3", got)
	}
	if got := a.Intn(10); got != 200%10 {
		t.Fatalf("second choice %d, want the input's second byte mod 10 = %d", got, 200%10)
	}
	b.Byte()
	b.Byte()
	for i := range 100 {
		x, y := a.Intn(1000), b.Intn(1000)
		if x != y || x < 0 || x >= 1000 {
			t.Fatalf("choice %d after the bytes: %d and %d from the same input (want equal, in [0, 1000))", i, x, y)
		}
	}
	if u := New(1, []byte{255}).Unit(); u != 1 {
		t.Errorf("Unit of byte 255 = %v, want 1", u)
	}
	if New(1, nil).Intn(1) != 0 || New(1, []byte{9}).Chance(1, 1) != true {
		t.Errorf("Intn(1) must be 0 and Chance(1, 1) true")
	}
}
