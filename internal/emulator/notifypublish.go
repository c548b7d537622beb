package emulator

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// Publishing notifications: each event a change makes (notifywatch.go)
// becomes, for every matching configuration of its bucket, one message
// built as GCS builds it, queued, and published to the Pub/Sub fake by
// one goroutine, so that requests do not wait for it. Without faults
// messages are published in the order their changes were seen.

// reorderHold is how long NotifyFaults.Reorder holds an event back
// waiting for the next one to overtake it.
const reorderHold = 100 * time.Millisecond

// NotifyFaults are the ways a test (or the demo) makes notifications
// arrive as Pub/Sub may deliver them (SetNotifyFaults). The zero value
// publishes every event once, in order, at once.
type NotifyFaults struct {
	// Delay publishes each event this long after its change.
	Delay time.Duration
	// Duplicate is the share of events (0 to 1) published twice: the
	// same message (attributes and data) as a second message.
	Duplicate float64
	// Reorder publishes the events in swapped pairs: an event is held
	// back until the next one is published (or for 100 ms), so that, for
	// example, an object's OBJECT_DELETE arrives before the
	// OBJECT_FINALIZE of the same generation.
	Reorder bool
}

// notifier is the emulator's notification state: the configurations
// (notifyconfig.go, guarded by mu) and the queue of messages to publish.
type notifier struct {
	mu      sync.RWMutex
	configs map[string][]NotificationConfig // bucket -> configurations
	seq     int64                           // the last configuration's ID
	count   atomic.Int64                    // configurations in all buckets

	faults atomic.Pointer[NotifyFaults]

	qmu   sync.Mutex
	queue []*message // to publish, in order
	held  *message   // held back by Reorder
	timer *time.Timer
	wake  chan struct{} // a message was queued (capacity 1)

	published atomic.Int64 // messages the Pub/Sub fake took
	failed    atomic.Int64 // messages it refused (a deleted topic)
}

// message is one notification to publish.
type message struct {
	topic string // projects/P/topics/T
	attrs map[string]string
	data  []byte
	due   time.Time
	twice bool // NotifyFaults.Duplicate chose it
}

// SetNotifyFaults replaces the notification faults for events from now
// on.
func (s *Server) SetNotifyFaults(f NotifyFaults) {
	s.notify.faults.Store(&f)
	if !f.Reorder {
		s.releaseHeld(nil)
	}
}

// NotificationsPublished returns how many notification messages the
// Pub/Sub fake has taken (a duplicate counts twice).
func (s *Server) NotificationsPublished() int64 { return s.notify.published.Load() }

// NotificationsFailed returns how many notification messages the Pub/Sub
// fake refused (their topic was deleted).
func (s *Server) NotificationsFailed() int64 { return s.notify.failed.Load() }

// publishEvent queues the messages of one event on object a for every
// matching configuration of its bucket, with extra attributes.
func (s *Server) publishEvent(event string, a *fakestorage.ObjectAttrs, extra map[string]string, at time.Time) {
	cfgs := s.matchingConfigs(a.BucketName, event, a.Name)
	if len(cfgs) == 0 || s.ps == nil {
		return
	}
	f := s.notifyFaults()
	var payload []byte
	for _, c := range cfgs {
		attrs := make(map[string]string, 10+len(c.CustomAttributes))
		for k, v := range c.CustomAttributes {
			attrs[k] = v
		}
		for k, v := range map[string]string{
			"notificationConfig": "projects/_/buckets/" + a.BucketName + "/notificationConfigs/" + c.ID,
			"eventType":          event,
			"payloadFormat":      c.PayloadFormat,
			"bucketId":           a.BucketName,
			"objectId":           a.Name,
			"objectGeneration":   strconv.FormatInt(a.Generation, 10),
			"eventTime":          at.UTC().Format(time.RFC3339Nano),
		} {
			attrs[k] = v
		}
		for k, v := range extra {
			attrs[k] = v
		}
		m := &message{topic: strings.TrimPrefix(c.Topic, topicPrefix), attrs: attrs, due: at.Add(f.Delay)}
		if c.PayloadFormat == PayloadJSON {
			if payload == nil {
				payload, _ = json.Marshal(objectJSON(*a, s.url))
			}
			m.data = payload
		}
		m.twice = f.Duplicate > 0 && rand.Float64() < f.Duplicate
		s.enqueue(m, f.Reorder)
	}
}

// notifyFaults returns the current NotifyFaults.
func (s *Server) notifyFaults() NotifyFaults {
	if f := s.notify.faults.Load(); f != nil {
		return *f
	}
	return NotifyFaults{}
}

// enqueue adds m to the queue; with reorder, it swaps it with the event
// held back, or holds it back.
func (s *Server) enqueue(m *message, reorder bool) {
	n := &s.notify
	n.qmu.Lock()
	switch {
	case !reorder && n.held == nil:
		n.queue = append(n.queue, m)
	case n.held == nil:
		n.held = m
		n.timer = time.AfterFunc(reorderHold, func() { s.releaseHeld(m) })
	default:
		n.timer.Stop()
		// The held event keeps its due time, so it goes right after.
		n.queue = append(n.queue, m, n.held)
		n.held = nil
	}
	n.qmu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// releaseHeld queues the event Reorder holds back, if any and if it is
// only (nil: whichever it is).
func (s *Server) releaseHeld(only *message) {
	n := &s.notify
	n.qmu.Lock()
	if n.held != nil && (only == nil || n.held == only) {
		n.queue = append(n.queue, n.held)
		n.held = nil
	}
	n.qmu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// publishLoop publishes the queued messages, each once it is due, until
// ctx ends. Messages still queued then are dropped.
func (s *Server) publishLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	n := &s.notify
	for {
		n.qmu.Lock()
		var m *message
		if len(n.queue) > 0 {
			m = n.queue[0]
			n.queue[0] = nil
			n.queue = n.queue[1:]
		}
		n.qmu.Unlock()
		if m == nil {
			select {
			case <-ctx.Done():
				return
			case <-n.wake:
			}
			continue
		}
		if !sleepCtx(ctx, time.Until(m.due)) {
			return
		}
		s.publishMessage(ctx, m)
		if m.twice {
			s.publishMessage(ctx, m)
		}
	}
}

// publishMessage hands m to the Pub/Sub fake.
func (s *Server) publishMessage(ctx context.Context, m *message) {
	_, err := s.ps.GServer.Publish(ctx, &pubsubpb.PublishRequest{
		Topic:    m.topic,
		Messages: []*pubsubpb.PubsubMessage{{Data: m.data, Attributes: m.attrs}},
	})
	if err != nil {
		s.notify.failed.Add(1)
		return
	}
	s.notify.published.Add(1)
}
