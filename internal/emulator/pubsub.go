package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The Pub/Sub fake (Options.PubSub): a pstest server on a gRPC listener
// of its own, to which the emulator publishes GCS's object change
// notifications (notifyconfig.go, notifywatch.go, notifypublish.go).
// Clients reach it as they reach Pub/Sub's own emulator: with
// PUBSUB_EMULATOR_HOST set to PubSubAddr, or option.WithEndpoint(addr)
// with insecure gRPC credentials and no authentication.

// ErrNoPubSub is returned by the Pub/Sub helpers of an emulator started
// without Options.PubSub.
var ErrNoPubSub = errors.New("emulator: no Pub/Sub fake (Options.PubSub)")

// startPubSub starts a pstest server listening on addr ("" means
// "127.0.0.1:0"). pstest panics when it cannot listen; that is turned
// into an error.
func startPubSub(addr string) (ps *pstest.Server, err error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	defer func() {
		if r := recover(); r != nil {
			ps, err = nil, fmt.Errorf("emulator: start Pub/Sub fake on %s: %v", addr, r)
		}
	}()
	return pstest.NewServerWithAddress(addr), nil
}

// PubSubAddr returns the host:port of the Pub/Sub fake, what a client
// puts in PUBSUB_EMULATOR_HOST, or "" without Options.PubSub.
func (s *Server) PubSubAddr() string {
	if s.ps == nil {
		return ""
	}
	host, port, err := net.SplitHostPort(s.ps.Addr)
	if err != nil {
		return s.ps.Addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// PubSub returns the pstest server behind PubSubAddr (nil without
// Options.PubSub), for what this package does not cover: its Messages
// are every message published, duplicates included.
func (s *Server) PubSub() *pstest.Server { return s.ps }

// CreateTopic creates the topic projects/PROJECT/topics/TOPIC in the
// Pub/Sub fake. Creating an existing topic does nothing.
func (s *Server) CreateTopic(project, topic string) error {
	if s.ps == nil {
		return ErrNoPubSub
	}
	name := "projects/" + project + "/topics/" + topic
	if _, _, ok := splitTopic(name); !ok {
		return fmt.Errorf("emulator: invalid topic %q", name)
	}
	_, err := s.ps.GServer.CreateTopic(context.Background(), &pubsubpb.Topic{Name: name})
	if status.Code(err) == codes.AlreadyExists {
		return nil
	}
	return err
}

// topicExists reports whether the Pub/Sub fake has the topic
// ("projects/P/topics/T").
func (s *Server) topicExists(name string) bool {
	if s.ps == nil {
		return false
	}
	_, err := s.ps.GServer.GetTopic(context.Background(), &pubsubpb.GetTopicRequest{Topic: name})
	return err == nil
}

// topicPrefix is how GCS writes a notification configuration's topic.
const topicPrefix = "//pubsub.googleapis.com/"

// splitTopic reads "projects/P/topics/T", with or without GCS's
// "//pubsub.googleapis.com/" in front.
func splitTopic(topic string) (project, name string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(topic, topicPrefix), "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[1] == "" || parts[2] != "topics" || parts[3] == "" {
		return "", "", false
	}
	return parts[1], parts[3], true
}
