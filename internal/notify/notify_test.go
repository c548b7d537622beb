package notify

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

const (
	project = "p"
	topic   = "projects/p/topics/changes"
)

// fakeEnv is a Pub/Sub fake with a topic, reached through
// PUBSUB_EMULATOR_HOST, and what a Subscriber was told.
type fakeEnv struct {
	t      *testing.T
	ctx    context.Context
	srv    *pstest.Server
	client *pubsub.Client

	mu     sync.Mutex
	events []Event
	states []State
	got    chan struct{}
}

func newFakeEnv(t *testing.T) *fakeEnv {
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.Addr)
	ctx := testutil.Ctx(t, time.Minute)
	client, err := pubsub.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	return &fakeEnv{t: t, ctx: ctx, srv: srv, client: client, got: make(chan struct{}, 100)}
}

func (e *fakeEnv) options() Options {
	return Options{Topic: topic, Bucket: "b", Host: "host.example", Mountpoint: "/mnt/x", Silence: 300 * time.Millisecond,
		Apply: func(ev Event) {
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.mu.Unlock()
			e.got <- struct{}{}
		},
		OnState: func(s State) { e.mu.Lock(); e.states = append(e.states, s); e.mu.Unlock() },
	}
}

// publish publishes a GCS notification of bucket for name#gen.
func (e *fakeEnv) publish(bucket, typ, name string, gen int64) {
	data := fmt.Sprintf(`{"name":%q,"bucket":%q,"generation":"%d","metageneration":"1","size":"3","updated":"2026-11-28T10:00:00.5Z","crc32c":"AAAAAA=="}`, name, bucket, gen)
	e.srv.Publish(topic, []byte(data), map[string]string{"bucketId": bucket, "objectId": name, "objectGeneration": strconv.FormatInt(gen, 10),
		"eventType": typ, "payloadFormat": "JSON_API_V1", "eventTime": "2026-11-28T10:00:00.5Z"})
}

// waitFor waits until cond holds, checking after each event or state
// change, within the test's time.
func (e *fakeEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		e.mu.Lock()
		ok := cond()
		e.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("waiting for %s: %v", what, e.ctx.Err())
		case <-e.got:
		case <-tick.C:
		}
	}
}

// A subscription of the mount's own is made on the topic (named after
// the host and mountpoint, filtered to the bucket, expiring), its events
// of the bucket are handed over parsed and those of other buckets are
// not, and Close deletes it.
func TestOwnSubscription(t *testing.T) {
	e := newFakeEnv(t)
	s, err := Start(e.ctx, e.options())
	if err != nil {
		t.Fatal(err)
	}
	name := "projects/p/subscriptions/" + SubscriptionID("host.example", "/mnt/x")
	sub, err := e.client.SubscriptionAdminClient.GetSubscription(e.ctx, &pb.GetSubscriptionRequest{Subscription: name})
	if err != nil {
		t.Fatalf("the subscription %s: %v", name, err)
	}
	if sub.Filter != `attributes.bucketId = "b"` || sub.ExpirationPolicy.GetTtl().AsDuration() != 24*time.Hour {
		t.Errorf("subscription filter %q, expiration %v", sub.Filter, sub.ExpirationPolicy.GetTtl().AsDuration())
	}
	e.publish("other", Finalize, "x", 1)
	e.publish("b", Finalize, "dir/f", 7)
	e.waitFor("dir/f", func() bool { return len(e.events) > 0 })
	e.mu.Lock()
	ev := e.events[0]
	n := len(e.events)
	e.mu.Unlock()
	if ev.Name != "dir/f" || ev.Generation != 7 || ev.Type != Finalize || ev.Object == nil || ev.Object.Size != 3 || ev.Time.IsZero() {
		t.Errorf("event %+v (object %+v)", ev, ev.Object)
	}
	if n != 1 {
		t.Errorf("%d events handed over, want 1 (the other bucket's dropped)", n)
	}
	if st := s.State(); !st.Live || st.Subscription != name {
		t.Errorf("state %+v, want live on %s", st, name)
	}
	if err := s.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.SubscriptionAdminClient.GetSubscription(e.ctx, &pb.GetSubscriptionRequest{Subscription: name}); err == nil {
		t.Error("the subscription is still there after Close")
	}
}

// An upload of the mount's own that is not announced within Silence
// takes the announcements for stopped (down, with why); the next
// announcement brings them back. One announced before Expect is called
// (before the upload's answer) is no silence.
func TestSilenceIsDown(t *testing.T) {
	e := newFakeEnv(t)
	s, err := Start(e.ctx, e.options())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(e.ctx)
	e.publish("b", Finalize, "early", 3)
	e.waitFor("early", func() bool { return len(e.events) == 1 })
	s.Expect("early", 3) // announced already
	s.Expect("mine", 5)
	e.waitFor("down", func() bool { return len(e.states) > 0 && !e.states[len(e.states)-1].Live })
	if st := s.State(); st.Live || st.Why == "" {
		t.Errorf("state %+v, want down with why", st)
	}
	e.mu.Lock()
	why := e.states[len(e.states)-1].Why
	e.mu.Unlock()
	if want := "(mine)"; !strings.Contains(why, want) {
		t.Errorf("down for %q, want it to name %s", why, want)
	}
	e.publish("b", Finalize, "mine", 5)
	e.waitFor("live again", func() bool { return e.states[len(e.states)-1].Live })
}

// A subscription deleted under the mount: down, then made again and
// live, and announcements flow again.
func TestSubscriptionDeletedUnderTheMount(t *testing.T) {
	e := newFakeEnv(t)
	s, err := Start(e.ctx, e.options())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(e.ctx)
	name := "projects/p/subscriptions/" + SubscriptionID("host.example", "/mnt/x")
	if err := e.client.SubscriptionAdminClient.DeleteSubscription(e.ctx, &pb.DeleteSubscriptionRequest{Subscription: name}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("down", func() bool { return len(e.states) > 1 && !e.states[len(e.states)-1].Live })
	e.waitFor("live again", func() bool { return e.states[len(e.states)-1].Live })
	e.waitFor("made again", func() bool {
		_, err := e.client.SubscriptionAdminClient.GetSubscription(e.ctx, &pb.GetSubscriptionRequest{Subscription: name})
		return err == nil
	})
	e.publish("b", Delete, "gone", 9)
	e.waitFor("the deletion", func() bool { return len(e.events) == 1 && e.events[0].Gone() })
}

// Parse takes GCS's attributes and payload, and refuses what is not one.
func TestParse(t *testing.T) {
	attrs := map[string]string{"bucketId": "b", "objectId": "o", "objectGeneration": "12", "eventType": Delete, "payloadFormat": "NONE", "eventTime": "2026-11-28T10:00:00Z"}
	ev, bucket, err := Parse(attrs, nil)
	if err != nil || bucket != "b" || ev.Name != "o" || ev.Generation != 12 || !ev.Gone() || ev.Object != nil {
		t.Errorf("Parse = %+v, %q, %v", ev, bucket, err)
	}
	for _, bad := range []map[string]string{
		{"bucketId": "b", "objectId": "o", "objectGeneration": "x", "eventType": Finalize},
		{"bucketId": "b", "objectId": "o", "objectGeneration": "1", "eventType": "SOMETHING"},
		{"bucketId": "b", "objectGeneration": "1", "eventType": Finalize},
	} {
		if _, _, err := Parse(bad, nil); err == nil {
			t.Errorf("Parse(%v) took it", bad)
		}
	}
	mismatch := map[string]string{"bucketId": "b", "objectId": "o", "objectGeneration": "1", "eventType": Finalize, "payloadFormat": "JSON_API_V1"}
	if _, _, err := Parse(mismatch, []byte(`{"name":"p","generation":"1"}`)); err == nil {
		t.Error("Parse took a payload about another object")
	}
}
