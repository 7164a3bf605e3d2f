package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// APIPrefix is the prefix of request/reply subjects: gpusched.api.<verb>.
const APIPrefix = "gpusched.api."

// API verbs.
const (
	VerbSubmit = "submit"
	VerbStatus = "status"
	VerbList   = "list"
	VerbCancel = "cancel"
	VerbNodes  = "nodes"
)

// Verbs lists every API verb.
var Verbs = []string{VerbSubmit, VerbStatus, VerbList, VerbCancel, VerbNodes}

// ErrorReply is the body of every failed request.
type ErrorReply struct {
	Error string `json:"error"`
}

// Handler serves one verb: it gets the raw request body and returns a value
// to encode as the JSON reply, or an error (sent as {"error": ...}).
type Handler func(body []byte) (any, error)

// ServeAPI subscribes a handler per verb. Replies are JSON; a body that is
// not valid JSON gets an error reply that says so, and the handler is not run.
func ServeAPI(nc *nats.Conn, handlers map[string]Handler) ([]*nats.Subscription, error) {
	var subs []*nats.Subscription
	for verb, h := range handlers {
		h, verb := h, verb
		sub, err := nc.Subscribe(APIPrefix+verb, func(m *nats.Msg) {
			reply := handle(verb, h, m.Data)
			if m.Reply != "" {
				_ = m.Respond(reply)
			}
		})
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return nil, err
		}
		subs = append(subs, sub)
	}
	return subs, nc.Flush()
}

func handle(verb string, h Handler, body []byte) (reply []byte) {
	defer func() {
		if r := recover(); r != nil {
			reply, _ = json.Marshal(ErrorReply{Error: fmt.Sprintf("%s: internal error: %v", verb, r)})
		}
	}()
	if len(body) == 0 {
		body = []byte("{}")
	}
	if !json.Valid(body) {
		b, _ := json.Marshal(ErrorReply{Error: fmt.Sprintf("%s: request is not valid JSON (%d bytes); send a JSON object, e.g. {\"job\": \"j-1\"}", verb, len(body))})
		return b
	}
	v, err := h(body)
	if err != nil {
		b, _ := json.Marshal(ErrorReply{Error: err.Error()})
		return b
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(ErrorReply{Error: fmt.Sprintf("%s: encode reply: %v", verb, err)})
	}
	return b
}

// Request sends req as JSON to gpusched.api.<verb> and decodes the reply
// into resp. An {"error": ...} reply becomes an error; no coordinator
// answering becomes an error naming the server tried.
func Request(nc *nats.Conn, verb string, req, resp any, timeout time.Duration) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	m, err := nc.Request(APIPrefix+verb, b, timeout)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("no coordinator is serving %s%s on NATS %s (start one with `coordinator serve`)", APIPrefix, verb, nc.ConnectedUrlRedacted())
	}
	if errors.Is(err, nats.ErrTimeout) {
		return fmt.Errorf("the coordinator did not answer %s%s within %s (NATS %s)", APIPrefix, verb, timeout, nc.ConnectedUrlRedacted())
	}
	if err != nil {
		return err
	}
	var e ErrorReply
	if json.Unmarshal(m.Data, &e) == nil && e.Error != "" {
		return errors.New(e.Error)
	}
	if resp == nil {
		return nil
	}
	if d := bytes.TrimSpace(m.Data); len(d) == 0 || string(d) == "null" {
		// No handler answers null; decoding it would leave resp as it was.
		return fmt.Errorf("%s: empty reply from coordinator (%q)", verb, d)
	}
	if err := json.Unmarshal(m.Data, resp); err != nil {
		return fmt.Errorf("%s: bad reply from coordinator: %w", verb, err)
	}
	return nil
}
