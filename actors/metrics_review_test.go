package actors

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// The metrics server's stop function returns promptly and closes every
// connection, also one that is open but has sent no request (a port probe,
// a scraper that connected and stalled): before, stop waited the full 2 s
// of its graceful shutdown for such a connection, and returned with it
// still open, so every node Leave and coordinator Stop could take 2 s more.
func TestMetricsStopClosesSilentConnection(t *testing.T) {
	m := NewNodeMetrics()
	stop, addr, err := ServeMetrics("127.0.0.1:0", m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	defer silent.Close()
	// The server accepts in order: once a scrape on a later connection
	// is answered, the silent one has been accepted and is tracked.
	scrape, err := net.Dial("tcp", addr)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	defer scrape.Close()
	if _, err := io.WriteString(scrape, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		stop()
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(scrape), nil)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		stop()
		t.Fatalf("scrape: %s", resp.Status)
	}

	start := time.Now()
	stop()
	if d := time.Since(start); d > time.Second {
		t.Errorf("stop took %v with a connection that sent no request; want well under a second", d.Round(time.Millisecond))
	}
	_ = silent.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("the silent connection is still open after stop (read: %v)", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
