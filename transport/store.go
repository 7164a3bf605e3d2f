package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Bucket and stream names used in JetStream.
const (
	JobsBucket   = "gpusched-jobs"
	EventsStream = "GPUSCHED_EVENTS"
)

// ErrNotFound is returned by Store.Get for a missing key.
var ErrNotFound = errors.New("not found")

// Store is the runtime's durable key-value store: a JetStream KV bucket
// holding job specs, states and progress checkpoints.
type Store struct {
	kv jetstream.KeyValue
}

// OpenStore creates (or opens) the jobs bucket.
func OpenStore(nc *nats.Conn) (*Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	kv, err := js.CreateOrUpdateKeyValue(c, jetstream.KeyValueConfig{
		Bucket:      JobsBucket,
		Description: "gpusched job specs, states and progress checkpoints",
		History:     1,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("open JetStream KV bucket %s: %w (does the NATS server have JetStream enabled?)", JobsBucket, err)
	}
	return &Store{kv: kv}, nil
}

// Put stores value under key.
func (s *Store) Put(key string, value []byte) error {
	c, cancel := ctx(5 * time.Second)
	defer cancel()
	_, err := s.kv.Put(c, key, value)
	return err
}

// Get returns the value under key, or ErrNotFound.
func (s *Store) Get(key string) ([]byte, error) {
	c, cancel := ctx(5 * time.Second)
	defer cancel()
	e, err := s.kv.Get(c, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}

// Delete removes key.
func (s *Store) Delete(key string) error {
	c, cancel := ctx(5 * time.Second)
	defer cancel()
	return s.kv.Delete(c, key)
}

// Keys lists the keys starting with prefix, in the bucket's order.
func (s *Store) Keys(prefix string) ([]string, error) {
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	return s.keys(c, prefix)
}

// keys is Keys, listing until c is done. It reads the bucket's watch
// itself: the library's key lister ends its list the same way whether
// every key was sent, its context ran out, or its subscription was closed,
// and a listing cut short must be an error, not a shorter list.
func (s *Store) keys(c context.Context, prefix string) ([]string, error) {
	w, err := s.kv.WatchAll(c, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	var out []string
	for {
		select {
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return nil, fmt.Errorf("list keys of %s: the watch ended before the listing did (the NATS connection closed?)", JobsBucket)
			case e == nil: // every key has been sent
				return out, nil
			case strings.HasPrefix(e.Key(), prefix):
				out = append(out, e.Key())
			}
		case <-c.Done():
			return nil, fmt.Errorf("list keys of %s: %w before the listing ended", JobsBucket, c.Err())
		}
	}
}
