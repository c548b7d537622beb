package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// TestPubSubLine runs the command with a Pub/Sub fake and a topic, and
// checks the lines it prints and the notification configuration it made.
func TestPubSubLine(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	runCtx, stop := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(runCtx, []string{"--addr", "127.0.0.1:0", "--bucket", "b", "--pubsub-addr", "127.0.0.1:0",
			"--pubsub-topic", "projects/p/topics/t", "--notify-delay", "10ms"}, pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	lines := bufio.NewScanner(pr)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("output ended: %v", lines.Err())
		}
		return lines.Text()
	}
	first := regexp.MustCompile(`^emulator listening on (http://\S+) bucket=b$`).FindStringSubmatch(next())
	if first == nil {
		t.Fatal("no emulator line")
	}
	line := next()
	if !regexp.MustCompile(`^pubsub emulator listening on 127\.0\.0\.1:[0-9]+ topic=projects/p/topics/t$`).MatchString(line) {
		t.Fatalf("pubsub line = %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, first[1]+"/storage/v1/b/b/notificationConfigs", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Topic         string `json:"topic"`
			PayloadFormat string `json:"payload_format"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || !strings.HasSuffix(list.Items[0].Topic, "projects/p/topics/t") || list.Items[0].PayloadFormat != "JSON_API_V1" {
		t.Errorf("configurations = %+v", list.Items)
	}
}
