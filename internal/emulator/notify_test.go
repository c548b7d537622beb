package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/storage"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const (
	testProject = "test-project"
	testTopic   = "changes"
)

// startWithPubSub runs an emulator with testBucket and a Pub/Sub fake with
// testTopic for the duration of the test.
func startWithPubSub(t *testing.T) *Server {
	t.Helper()
	s, err := Start(Options{Buckets: []string{testBucket}, PubSub: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Close)
	if err := s.CreateTopic(testProject, testTopic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	return s
}

// subscribe subscribes to topic through the official Pub/Sub client and
// returns the messages it receives (acknowledged).
func subscribe(t *testing.T, ctx context.Context, s *Server, topic string) <-chan *pubsub.Message {
	t.Helper()
	c, err := pubsub.NewClient(ctx, testProject,
		option.WithEndpoint(s.PubSubAddr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatalf("pubsub.NewClient: %v", err)
	}
	sub := fmt.Sprintf("projects/%s/subscriptions/%s-sub", testProject, topic)
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: sub, Topic: "projects/" + testProject + "/topics/" + topic,
	}); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	ch := make(chan *pubsub.Message, 100)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = c.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			select {
			case ch <- m:
			case <-rctx.Done():
			}
		})
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		c.Close()
	})
	return ch
}

// receive returns the next n messages of ch, sorted by event type and
// object name (Pub/Sub does not keep their order).
func receive(t *testing.T, ctx context.Context, ch <-chan *pubsub.Message, n int) []*pubsub.Message {
	t.Helper()
	var out []*pubsub.Message
	for len(out) < n {
		select {
		case m := <-ch:
			out = append(out, m)
		case <-ctx.Done():
			t.Fatalf("got %d of %d notifications: %v", len(out), n, ctx.Err())
		}
	}
	slices.SortFunc(out, func(a, b *pubsub.Message) int {
		return strings.Compare(a.Attributes["eventType"]+a.Attributes["objectId"], b.Attributes["eventType"]+b.Attributes["objectId"])
	})
	return out
}

// addConfig adds a notification configuration through the official client.
func addConfig(t *testing.T, ctx context.Context, c *storage.Client, n *storage.Notification) *storage.Notification {
	t.Helper()
	n.TopicProjectID, n.TopicID = testProject, testTopic
	if n.PayloadFormat == "" {
		n.PayloadFormat = storage.JSONPayload
	}
	out, err := c.Bucket(testBucket).AddNotification(ctx, n)
	if err != nil {
		t.Fatalf("AddNotification: %v", err)
	}
	return out
}

// checkEvent checks m's attributes, and its payload's name and generation
// if it has one.
func checkEvent(t *testing.T, m *pubsub.Message, cfgID, event, name string, gen int64, extra map[string]string) {
	t.Helper()
	a := m.Attributes
	want := map[string]string{
		"notificationConfig": "projects/_/buckets/" + testBucket + "/notificationConfigs/" + cfgID,
		"eventType":          event,
		"bucketId":           testBucket,
		"objectId":           name,
		"objectGeneration":   strconv.FormatInt(gen, 10),
	}
	for k, v := range extra {
		want[k] = v
	}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("%s %s: attribute %s = %q, want %q (all: %v)", event, name, k, a[k], v, a)
		}
	}
	if _, err := time.Parse(time.RFC3339, a["eventTime"]); err != nil {
		t.Errorf("%s %s: eventTime %q: %v", event, name, a["eventTime"], err)
	}
	for _, k := range []string{"overwroteGeneration", "overwrittenByGeneration"} {
		if _, ok := want[k]; !ok && a[k] != "" {
			t.Errorf("%s %s: unexpected %s=%q", event, name, k, a[k])
		}
	}
	if a["payloadFormat"] == PayloadNone {
		if len(m.Data) != 0 {
			t.Errorf("%s %s: NONE payload has %d bytes", event, name, len(m.Data))
		}
		return
	}
	var o map[string]any
	if err := json.Unmarshal(m.Data, &o); err != nil {
		t.Fatalf("%s %s: payload %q: %v", event, name, m.Data, err)
	}
	if o["kind"] != "storage#object" || o["name"] != name || o["bucket"] != testBucket || o["generation"] != strconv.FormatInt(gen, 10) {
		t.Errorf("%s %s: payload %s", event, name, m.Data)
	}
}

// write uploads data through the client: a resumable upload if chunk > 0
// and data is larger, else a multipart one.
func write(t *testing.T, ctx context.Context, c *storage.Client, name string, data []byte, chunk int) *storage.ObjectAttrs {
	t.Helper()
	w := c.Bucket(testBucket).Object(name).NewWriter(ctx)
	w.ChunkSize = chunk
	w.ContentType = "text/plain"
	w.Metadata = map[string]string{"k": "v"}
	if _, err := w.Write(data); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close %s: %v", name, err)
	}
	return w.Attrs()
}

func TestNotifyEventsThroughClients(t *testing.T) {
	ctx := testutil.Ctx(t, 60*time.Second)
	s := startWithPubSub(t)
	c := newClient(t, s, false)
	msgs := subscribe(t, ctx, s, testTopic)
	cfg := addConfig(t, ctx, c, &storage.Notification{CustomAttributes: map[string]string{"team": "fs"}})
	id := cfg.ID

	// Create (multipart): FINALIZE with the object's resource.
	a1 := write(t, ctx, c, "dir/a", []byte("hello"), 0)
	m := receive(t, ctx, msgs, 1)[0]
	checkEvent(t, m, id, EventFinalize, "dir/a", a1.Generation, map[string]string{"team": "fs", "payloadFormat": PayloadJSON})
	var o map[string]any
	_ = json.Unmarshal(m.Data, &o)
	if o["size"] != "5" || o["contentType"] != "text/plain" || o["md5Hash"] == "" || o["crc32c"] == "" || o["updated"] == "" || o["metageneration"] == nil {
		t.Errorf("FINALIZE payload lacks fields: %s", m.Data)
	}
	if md, _ := o["metadata"].(map[string]any); md["k"] != "v" {
		t.Errorf("FINALIZE payload metadata = %v", o["metadata"])
	}

	// Overwrite: DELETE of the old generation, FINALIZE of the new.
	a2 := write(t, ctx, c, "dir/a", []byte("hello again"), 0)
	ms := receive(t, ctx, msgs, 2)
	checkEvent(t, ms[0], id, EventDelete, "dir/a", a1.Generation, map[string]string{"overwrittenByGeneration": strconv.FormatInt(a2.Generation, 10)})
	checkEvent(t, ms[1], id, EventFinalize, "dir/a", a2.Generation, map[string]string{"overwroteGeneration": strconv.FormatInt(a1.Generation, 10)})

	// Metadata patch.
	if _, err := c.Bucket(testBucket).Object("dir/a").Update(ctx, storage.ObjectAttrsToUpdate{Metadata: map[string]string{"k": "w"}}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	m = receive(t, ctx, msgs, 1)[0]
	checkEvent(t, m, id, EventMetadataUpdate, "dir/a", a2.Generation, nil)
	if !bytes.Contains(m.Data, []byte(`"k":"w"`)) {
		t.Errorf("METADATA_UPDATE payload %s lacks the new metadata", m.Data)
	}

	// Copy.
	cp, err := c.Bucket(testBucket).Object("dir/b").CopierFrom(c.Bucket(testBucket).Object("dir/a")).Run(ctx)
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	checkEvent(t, receive(t, ctx, msgs, 1)[0], id, EventFinalize, "dir/b", cp.Generation, nil)

	// Compose.
	comp, err := c.Bucket(testBucket).Object("dir/c").ComposerFrom(c.Bucket(testBucket).Object("dir/a"), c.Bucket(testBucket).Object("dir/b")).Run(ctx)
	if err != nil {
		t.Fatalf("compose: %v", err)
	}
	checkEvent(t, receive(t, ctx, msgs, 1)[0], id, EventFinalize, "dir/c", comp.Generation, nil)

	// Resumable upload (the emulator's sessions), three chunks.
	big := testutil.Pattern(600<<10, 1)
	ar := write(t, ctx, c, "dir/big", big, 256<<10)
	m = receive(t, ctx, msgs, 1)[0]
	checkEvent(t, m, id, EventFinalize, "dir/big", ar.Generation, nil)
	if !bytes.Contains(m.Data, []byte(`"size":"614400"`)) {
		t.Errorf("resumable FINALIZE payload %s", m.Data)
	}

	// Delete.
	if err := c.Bucket(testBucket).Object("dir/b").Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	checkEvent(t, receive(t, ctx, msgs, 1)[0], id, EventDelete, "dir/b", cp.Generation, nil)

	// The Go methods.
	g, err := s.Put(testBucket, "direct", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	checkEvent(t, receive(t, ctx, msgs, 1)[0], id, EventFinalize, "direct", g, nil)
	if err := s.Delete(testBucket, "direct"); err != nil {
		t.Fatal(err)
	}
	checkEvent(t, receive(t, ctx, msgs, 1)[0], id, EventDelete, "direct", g, nil)
}

func TestNotifyFiltersAndConfigs(t *testing.T) {
	ctx := testutil.Ctx(t, 60*time.Second)
	s := startWithPubSub(t)
	c := newClient(t, s, false)
	msgs := subscribe(t, ctx, s, testTopic)

	// A topic that does not exist is refused, as GCS refuses it.
	_, err := c.Bucket(testBucket).AddNotification(ctx, &storage.Notification{TopicProjectID: testProject, TopicID: "nope", PayloadFormat: storage.JSONPayload})
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) || gerr.Code != http.StatusBadRequest {
		t.Fatalf("AddNotification of a missing topic: %v, want 400", err)
	}

	// No configuration, no events.
	if _, err := s.Put(testBucket, "a/quiet", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(testBucket, "a/quiet"); err != nil {
		t.Fatal(err)
	}

	// Inserted as "projects/P/topics/T", read back as GCS writes it.
	resp, err := http.Post(s.URL()+"/storage/v1/b/"+testBucket+"/notificationConfigs", "application/json",
		strings.NewReader(`{"topic":"projects/`+testProject+`/topics/`+testTopic+`","payload_format":"NONE","event_types":["OBJECT_DELETE"],"object_name_prefix":"a/"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got NotificationConfig
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil {
		t.Fatalf("insert: %d %s", resp.StatusCode, body)
	}
	if got.Kind != "storage#notification" || got.Topic != "//pubsub.googleapis.com/projects/"+testProject+"/topics/"+testTopic ||
		got.ID == "" || got.Etag == "" || !strings.HasSuffix(got.SelfLink, "/notificationConfigs/"+got.ID) {
		t.Errorf("insert answered %s", body)
	}
	list, err := c.Bucket(testBucket).Notifications(ctx)
	if err != nil || len(list) != 1 || list[got.ID] == nil || list[got.ID].ObjectNamePrefix != "a/" || list[got.ID].TopicID != testTopic {
		t.Fatalf("Notifications = %v, %v", list, err)
	}

	// Only deletes under a/.
	for _, n := range []string{"b/x", "a/x"} {
		if _, err := s.Put(testBucket, n, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	gen, _ := s.Generation(testBucket, "a/x")
	for _, n := range []string{"b/x", "a/x"} {
		if err := s.Delete(testBucket, n); err != nil {
			t.Fatal(err)
		}
	}
	checkEvent(t, receive(t, ctx, msgs, 1)[0], got.ID, EventDelete, "a/x", gen, map[string]string{"payloadFormat": PayloadNone})
	// Events are published in order: anything else would be there.
	if n := len(s.PubSub().Messages()); n != 1 {
		t.Errorf("published %d messages, want 1", n)
	}

	if err := c.Bucket(testBucket).DeleteNotification(ctx, got.ID); err != nil {
		t.Fatalf("DeleteNotification: %v", err)
	}
	if list, err := c.Bucket(testBucket).Notifications(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after delete: %v, %v", list, err)
	}
}

func TestNotifyFaults(t *testing.T) {
	ctx := testutil.Ctx(t, 60*time.Second)
	s := startWithPubSub(t)
	msgs := subscribe(t, ctx, s, testTopic)
	cfg, err := s.AddNotification(testBucket, NotificationConfig{Topic: "projects/" + testProject + "/topics/" + testTopic})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("delay", func(t *testing.T) {
		const delay = 300 * time.Millisecond
		s.SetNotifyFaults(NotifyFaults{Delay: delay})
		start := time.Now()
		g, _ := s.Put(testBucket, "late", []byte("x"))
		checkEvent(t, receive(t, ctx, msgs, 1)[0], cfg.ID, EventFinalize, "late", g, nil)
		if d := time.Since(start); d < delay {
			t.Errorf("event arrived after %v, want at least %v", d, delay)
		}
	})

	t.Run("duplicate", func(t *testing.T) {
		s.SetNotifyFaults(NotifyFaults{Duplicate: 1})
		g, _ := s.Put(testBucket, "twice", []byte("x"))
		ms := receive(t, ctx, msgs, 2)
		for _, m := range ms {
			checkEvent(t, m, cfg.ID, EventFinalize, "twice", g, nil)
		}
		if ms[0].ID == ms[1].ID || ms[0].Attributes["eventTime"] != ms[1].Attributes["eventTime"] {
			t.Errorf("duplicates: ids %s %s, times %s %s", ms[0].ID, ms[1].ID, ms[0].Attributes["eventTime"], ms[1].Attributes["eventTime"])
		}
	})

	t.Run("reorder", func(t *testing.T) {
		s.SetNotifyFaults(NotifyFaults{Reorder: true})
		before := len(s.PubSub().Messages())
		g, _ := s.Put(testBucket, "brief", []byte("x"))
		if err := s.Delete(testBucket, "brief"); err != nil {
			t.Fatal(err)
		}
		ms := receive(t, ctx, msgs, 2)
		checkEvent(t, ms[0], cfg.ID, EventDelete, "brief", g, nil)
		checkEvent(t, ms[1], cfg.ID, EventFinalize, "brief", g, nil)
		// What Pub/Sub got, in the order it got it: the delete first.
		all := s.PubSub().Messages()[before:]
		if len(all) != 2 || all[0].Attributes["eventType"] != EventDelete || all[1].Attributes["eventType"] != EventFinalize {
			for _, m := range all {
				t.Logf("published %s", m.Attributes["eventType"])
			}
			t.Errorf("published %d messages, want DELETE then FINALIZE", len(all))
		}
	})
}

func TestNotifyFolderRenameAndSeeded(t *testing.T) {
	ctx := testutil.Ctx(t, 60*time.Second)
	s := startWithPubSub(t)
	msgs := subscribe(t, ctx, s, testTopic)
	s.SetHierarchical(testBucket, true)
	cfg, err := s.AddNotification(testBucket, NotificationConfig{Topic: "projects/" + testProject + "/topics/" + testTopic, PayloadFormat: PayloadNone})
	if err != nil {
		t.Fatal(err)
	}

	// PutMany: a FINALIZE per object, from the seeded store.
	n, err := s.PutMany(testBucket, slices.Values([]Seed{{Name: "src/a", Data: []byte("a")}, {Name: "src/b", Data: []byte("b")}}))
	if err != nil || n != 2 {
		t.Fatalf("PutMany = %d, %v", n, err)
	}
	ga, _ := s.Generation(testBucket, "src/a")
	gb, _ := s.Generation(testBucket, "src/b")
	ms := receive(t, ctx, msgs, 2)
	checkEvent(t, ms[0], cfg.ID, EventFinalize, "src/a", ga, nil)
	checkEvent(t, ms[1], cfg.ID, EventFinalize, "src/b", gb, nil)

	// A folder rename: each object moved is a FINALIZE at its new name
	// and a DELETE at its old.
	resp, err := http.Post(s.URL()+"/storage/v1/b/"+testBucket+"/folders/src%2F/renameTo/folders/dst%2F", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("rename: %s", resp.Status)
	}
	na, _ := s.Generation(testBucket, "dst/a")
	nb, _ := s.Generation(testBucket, "dst/b")
	ms = receive(t, ctx, msgs, 4)
	checkEvent(t, ms[0], cfg.ID, EventDelete, "src/a", ga, nil)
	checkEvent(t, ms[1], cfg.ID, EventDelete, "src/b", gb, nil)
	checkEvent(t, ms[2], cfg.ID, EventFinalize, "dst/a", na, nil)
	checkEvent(t, ms[3], cfg.ID, EventFinalize, "dst/b", nb, nil)
}
