// Package notify receives a bucket's object change notifications (GCS
// publishes them to Cloud Pub/Sub once the bucket has a notification
// configuration) and hands each change of the mounted bucket to its
// caller, so that a mount sees another machine's change within a second
// instead of after its metadata TTL.
//
// A Subscriber either makes a subscription of its own on a topic
// (Options.Topic), named after the host and the mount so that an
// operator can tell whom it serves, filtered to the bucket and with an
// expiration policy (one left behind by a dead VM goes away by itself),
// and deletes it at Close; or it uses one the operator made
// (Options.Subscription). It pulls with Google's client library
// (streaming pull), which honours PUBSUB_EMULATOR_HOST.
//
// State: live while the stream works; down, with the reason, when the
// library gives up (a subscription or topic deleted, permission
// refused), or when the stream is silent: an upload of this mount
// (Expect) whose announcement does not come within Options.Silence. A
// stream that broke is started again after a backoff; the caller learns
// of every change of state (Options.OnState), and trusts what it knows
// only while live: events lost while down must be asked for again.
//
// Delivery is at least once and in no order; the caller applies events
// by generation (fs/names.Announce).
package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bucketfs/bucketfs/transfer"
)

// Event types, as GCS names them (the eventType attribute).
const (
	Finalize       = "OBJECT_FINALIZE"
	MetadataUpdate = "OBJECT_METADATA_UPDATE"
	Delete         = "OBJECT_DELETE"
	Archive        = "OBJECT_ARCHIVE"
)

// Event is one announced change of an object of the bucket.
type Event struct {
	Type       string // Finalize, MetadataUpdate, Delete or Archive
	Name       string
	Generation int64
	Time       time.Time // eventTime: when the change was made
	// Object is the version's resource (payload format JSON_API_V1);
	// nil with payload format NONE.
	Object *transfer.ObjectAttrs
}

// Gone reports whether the event's version is gone (deleted or archived).
func (e Event) Gone() bool { return e.Type == Delete || e.Type == Archive }

// State is the subscription's state.
type State struct {
	Live         bool
	Since        time.Time // when it became what it is
	Why          string    // when down: why
	Subscription string    // the subscription's full name
}

// Options configure a Subscriber. One of Topic and Subscription is set.
type Options struct {
	Topic        string // projects/P/topics/T: a subscription of the mount's own
	Subscription string // projects/P/subscriptions/S: the operator's
	Bucket       string // events of other buckets are ignored
	// Host and Mountpoint name the mount's own subscription.
	Host, Mountpoint string
	// Expiration is the own subscription's expiration policy: deleted by
	// Pub/Sub after this long without a subscriber (0: 24 h, the least
	// Pub/Sub takes).
	Expiration time.Duration
	// Silence: an upload of this mount not announced within it means
	// the announcements stopped (0: 30 s).
	Silence time.Duration
	// CheckEvery: how often the subscription is checked (it exists, its
	// topic too); a stream on a deleted subscription may say nothing
	// (0: 30 s).
	CheckEvery time.Duration
	// ClientOptions are given to the Pub/Sub client (credentials).
	ClientOptions []option.ClientOption
	// Apply is called with each event of Bucket, from the library's
	// goroutines, possibly concurrently; it must not block for long.
	Apply func(Event)
	// OnState is told of every change of state, from one goroutine.
	OnState func(State)
	Logger  *slog.Logger
}

// Subscriber receives events until Close.
type Subscriber struct {
	o      Options
	client *pubsub.Client
	sub    string // the subscription's full name
	own    bool   // made here: deleted at Close

	cancel context.CancelFunc
	done   chan struct{}
	renew  chan string // the check found the stream useless: why (run starts it again)

	mu       sync.Mutex
	state    State
	expected map[expectKey]time.Time // guarded by mu: own uploads not yet announced, when confirmed
	seen     map[expectKey]time.Time // guarded by mu: versions announced lately (an announcement may come before its upload's answer)
}

type expectKey struct {
	name string
	gen  int64
}

// Start makes (or checks) the subscription and starts receiving. An
// error means the subscription cannot be used at all (a bad name, the
// topic missing, permission refused); later failures are states.
func Start(ctx context.Context, o Options) (*Subscriber, error) {
	if (o.Topic == "") == (o.Subscription == "") {
		return nil, errors.New("notify: give a topic or a subscription, not both")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Expiration <= 0 {
		o.Expiration = 24 * time.Hour
	}
	if o.Silence <= 0 {
		o.Silence = 30 * time.Second
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = 30 * time.Second
	}
	full := o.Subscription
	if o.Topic != "" {
		full = o.Topic
	}
	project, err := projectOf(full)
	if err != nil {
		return nil, err
	}
	client, err := pubsub.NewClient(ctx, project, o.ClientOptions...)
	if err != nil {
		return nil, fmt.Errorf("notify: the Pub/Sub client: %w", err)
	}
	s := &Subscriber{o: o, client: client, sub: o.Subscription, expected: map[expectKey]time.Time{}, seen: map[expectKey]time.Time{}, done: make(chan struct{}), renew: make(chan string, 1)}
	if o.Topic != "" {
		s.own = true
		s.sub = fmt.Sprintf("projects/%s/subscriptions/%s", project, SubscriptionID(o.Host, o.Mountpoint))
		if err := s.create(ctx); err != nil {
			client.Close()
			return nil, err
		}
	} else if _, err := client.SubscriptionAdminClient.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: s.sub}); err != nil {
		client.Close()
		return nil, fmt.Errorf("notify: subscription %s: %w", s.sub, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(rctx)
	return s, nil
}

// projectOf returns P of projects/P/topics/T or projects/P/subscriptions/S.
func projectOf(full string) (string, error) {
	parts := strings.Split(full, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[1] == "" || (parts[2] != "topics" && parts[2] != "subscriptions") || parts[3] == "" {
		return "", fmt.Errorf("notify: %q is not projects/PROJECT/topics/TOPIC or projects/PROJECT/subscriptions/SUBSCRIPTION", full)
	}
	return parts[1], nil
}

// SubscriptionID is the ID of the subscription a mount of mountpoint on
// host makes: bucketfs-HOST-HASH, HASH of the mountpoint.
func SubscriptionID(host, mountpoint string) string {
	sum := sha256.Sum256([]byte(mountpoint))
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			return r
		}
		return '-'
	}, host)
	if len(clean) > 200 {
		clean = clean[:200]
	}
	return "bucketfs-" + clean + "-" + hex.EncodeToString(sum[:6])
}

// create makes the own subscription, or takes the one a crashed mount of
// the same host and mountpoint left (the same name).
func (s *Subscriber) create(ctx context.Context) error {
	_, err := s.client.SubscriptionAdminClient.CreateSubscription(ctx, &pb.Subscription{
		Name:               s.sub,
		Topic:              s.o.Topic,
		AckDeadlineSeconds: 10,
		Filter:             fmt.Sprintf("attributes.bucketId = %q", s.o.Bucket),
		ExpirationPolicy:   &pb.ExpirationPolicy{Ttl: durationpb.New(s.o.Expiration)},
		Labels:             map[string]string{"made-by": "bucketfs"},
	})
	if status.Code(err) == codes.AlreadyExists {
		s.o.Logger.Info("notifications: taking over the subscription an earlier mount of this mountpoint left", "subscription", s.sub)
		return nil
	}
	if err != nil {
		return fmt.Errorf("notify: making subscription %s on %s: %w", s.sub, s.o.Topic, err)
	}
	return nil
}

// run receives until ctx ends, starting the stream again after a backoff
// whenever the library gives up or the check finds the subscription
// gone.
func (s *Subscriber) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer close(s.done)
	defer wg.Wait() // before done: Close returns with nothing of s still running
	backoff := time.Second
	wg.Add(2)
	go func() { defer wg.Done(); s.watchSilence(ctx) }()
	go func() { defer wg.Done(); s.check(ctx) }()
	for ctx.Err() == nil {
		s.setState(true, "")
		sctx, stop := context.WithCancel(ctx)
		why := make(chan string, 1) // why the check ended the stream, or ""
		go func() {
			select {
			case w := <-s.renew:
				why <- w
				stop()
			case <-sctx.Done():
				why <- ""
			}
		}()
		err := s.client.Subscriber(s.sub).Receive(sctx, s.receive)
		stop()
		renewed := <-why
		if ctx.Err() != nil {
			return
		}
		down := "the stream ended"
		switch {
		case renewed != "":
			down = renewed
		case err != nil:
			down = err.Error()
		}
		s.setState(false, down)
		if s.own && (renewed != "" || status.Code(err) == codes.NotFound) {
			// Deleted under the mount (or expired): made again.
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			if cerr := s.create(cctx); cerr != nil {
				s.o.Logger.Warn("notifications: making the subscription again failed", "err", cerr)
			}
			cancel()
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// check asks for the subscription every CheckEvery until ctx ends: one
// deleted, or whose topic was deleted, ends the stream (a stream on it
// may deliver nothing and say nothing), which run starts again.
func (s *Subscriber) check(ctx context.Context) {
	tick := time.NewTicker(s.o.CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cctx, cancel := context.WithTimeout(ctx, s.o.CheckEvery)
		sub, err := s.client.SubscriptionAdminClient.GetSubscription(cctx, &pb.GetSubscriptionRequest{Subscription: s.sub})
		cancel()
		why := ""
		switch {
		case status.Code(err) == codes.NotFound:
			why = "the subscription " + s.sub + " is gone"
		case err == nil && sub.GetTopic() == "_deleted-topic_":
			why = "the topic of subscription " + s.sub + " was deleted"
		}
		if why == "" {
			continue
		}
		select {
		case s.renew <- why:
		default:
		}
	}
}

// receive handles one message.
func (s *Subscriber) receive(_ context.Context, m *pubsub.Message) {
	m.Ack()
	ev, bucket, err := Parse(m.Attributes, m.Data)
	if err != nil {
		s.o.Logger.Warn("notifications: a message that is not a GCS object notification was dropped", "id", m.ID, "err", err)
		return
	}
	if bucket != s.o.Bucket {
		return
	}
	k := expectKey{ev.Name, ev.Generation}
	s.mu.Lock()
	delete(s.expected, k)
	if len(s.seen) < 4096 {
		s.seen[k] = time.Now()
	}
	down := !s.state.Live
	s.mu.Unlock()
	if down && s.silentDown() {
		s.setState(true, "") // announcements came back
	}
	s.o.Apply(ev)
}

// silentDown reports whether the state is down for silence (not for an
// error of the stream, which run ends).
func (s *Subscriber) silentDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.state.Live && strings.HasPrefix(s.state.Why, silenceWhy)
}

const silenceWhy = "no announcement came of this mount's own upload"

// Expect records that this mount's upload of generation gen of name was
// confirmed: its announcement must come within Options.Silence, or the
// announcements are taken for stopped.
func (s *Subscriber) Expect(name string, gen int64) {
	if s == nil {
		return
	}
	k := expectKey{name, gen}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[k]; ok {
		delete(s.seen, k)
		return // announced before the upload's answer came
	}
	if len(s.expected) < 4096 {
		s.expected[k] = time.Now()
	}
}

// watchSilence checks the expected announcements until ctx ends.
func (s *Subscriber) watchSilence(ctx context.Context) {
	tick := time.NewTicker(min(s.o.Silence/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var late string
		s.mu.Lock()
		for k, at := range s.expected {
			if time.Since(at) > s.o.Silence {
				late = k.name
				delete(s.expected, k)
			}
		}
		for k, at := range s.seen {
			if time.Since(at) > s.o.Silence {
				delete(s.seen, k)
			}
		}
		live := s.state.Live
		s.mu.Unlock()
		if late != "" && live {
			s.setState(false, fmt.Sprintf("%s (%s) within %v", silenceWhy, late, s.o.Silence))
		}
	}
}

// setState changes the state and tells OnState.
func (s *Subscriber) setState(live bool, why string) {
	s.mu.Lock()
	if s.state.Live == live && s.state.Why == why && !s.state.Since.IsZero() {
		s.mu.Unlock()
		return
	}
	s.state = State{Live: live, Since: time.Now(), Why: why, Subscription: s.sub}
	st := s.state
	s.mu.Unlock()
	if live {
		s.o.Logger.Info("notifications are live: changes made elsewhere show at once", "subscription", s.sub)
	} else {
		s.o.Logger.Warn("notifications are down: changes made elsewhere show after --metadata-ttl", "subscription", s.sub, "why", why)
	}
	if s.o.OnState != nil {
		s.o.OnState(st)
	}
}

// State returns the subscription's state now.
func (s *Subscriber) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Close stops receiving and deletes the mount's own subscription.
func (s *Subscriber) Close(ctx context.Context) error {
	s.cancel()
	<-s.done
	var err error
	if s.own {
		err = s.client.SubscriptionAdminClient.DeleteSubscription(ctx, &pb.DeleteSubscriptionRequest{Subscription: s.sub})
		if status.Code(err) == codes.NotFound {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("notify: deleting subscription %s (it expires by itself): %w", s.sub, err)
		}
	}
	if cerr := s.client.Close(); err == nil {
		err = cerr
	}
	return err
}

// Parse reads a GCS notification: its attributes and data. It returns
// the event and the bucket it is about.
func Parse(attrs map[string]string, data []byte) (Event, string, error) {
	ev := Event{Type: attrs["eventType"], Name: attrs["objectId"]}
	bucket := attrs["bucketId"]
	switch ev.Type {
	case Finalize, MetadataUpdate, Delete, Archive:
	default:
		return ev, bucket, fmt.Errorf("event type %q", ev.Type)
	}
	if bucket == "" || ev.Name == "" {
		return ev, bucket, errors.New("no bucketId or objectId")
	}
	gen, err := strconv.ParseInt(attrs["objectGeneration"], 10, 64)
	if err != nil || gen <= 0 {
		return ev, bucket, fmt.Errorf("objectGeneration %q", attrs["objectGeneration"])
	}
	ev.Generation = gen
	if t, err := time.Parse(time.RFC3339Nano, attrs["eventTime"]); err == nil {
		ev.Time = t
	}
	if attrs["payloadFormat"] == "JSON_API_V1" && len(data) > 0 {
		a, err := transfer.ObjectFromJSON(data)
		if err != nil {
			return ev, bucket, fmt.Errorf("the payload: %w", err)
		}
		if a.Name != ev.Name || a.Generation != gen {
			return ev, bucket, fmt.Errorf("the payload is %s#%d, the attributes %s#%d", a.Name, a.Generation, ev.Name, gen)
		}
		ev.Object = &a
	}
	return ev, bucket, nil
}
