package emulator

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Notification configurations: the JSON API's notificationConfigs of a
// bucket (insert, list, get, delete), answered by the emulator itself
// with GCS's fields. The fake routes these calls too, but keeps its
// configurations where only its own publisher (a Pub/Sub client found
// through the process's PUBSUB_EMULATOR_HOST) sees them; the emulator
// never hands it one, so that publisher stays idle.

// Event types of GCS's Pub/Sub notifications.
const (
	EventFinalize       = "OBJECT_FINALIZE"
	EventMetadataUpdate = "OBJECT_METADATA_UPDATE"
	EventDelete         = "OBJECT_DELETE"
	EventArchive        = "OBJECT_ARCHIVE"
)

// Payload formats of a notification configuration.
const (
	PayloadJSON = "JSON_API_V1" // the object's JSON API resource
	PayloadNone = "NONE"        // attributes only
)

// maxNotificationConfigs is how many configurations GCS lets a bucket
// have.
const maxNotificationConfigs = 100

// NotificationConfig is the JSON API's notification resource. On insert
// only Topic ("projects/P/topics/T", or as GCS writes it,
// "//pubsub.googleapis.com/projects/P/topics/T"), PayloadFormat ("" is
// JSON_API_V1), EventTypes (none: all), ObjectNamePrefix and
// CustomAttributes are read; the emulator sets the rest, and writes
// Topic as GCS does.
type NotificationConfig struct {
	Kind             string            `json:"kind"`
	ID               string            `json:"id"`
	Topic            string            `json:"topic"`
	PayloadFormat    string            `json:"payload_format"`
	EventTypes       []string          `json:"event_types,omitempty"`
	ObjectNamePrefix string            `json:"object_name_prefix,omitempty"`
	CustomAttributes map[string]string `json:"custom_attributes,omitempty"`
	Etag             string            `json:"etag"`
	SelfLink         string            `json:"selfLink"`
}

// matches reports whether an event of type event on object name goes to
// the configuration's topic.
func (c *NotificationConfig) matches(event, name string) bool {
	return strings.HasPrefix(name, c.ObjectNamePrefix) &&
		(len(c.EventTypes) == 0 || slices.Contains(c.EventTypes, event))
}

// clone returns a copy of c sharing nothing with it.
func (c NotificationConfig) clone() NotificationConfig {
	c.EventTypes = slices.Clone(c.EventTypes)
	c.CustomAttributes = maps.Clone(c.CustomAttributes)
	return c
}

// AddNotification adds a notification configuration to bucket, as
// notifications.insert does, and returns it as GCS would (with its ID).
// The topic must exist in the Pub/Sub fake (CreateTopic).
func (s *Server) AddNotification(bucket string, c NotificationConfig) (NotificationConfig, error) {
	out, _, err := s.insertNotification(bucket, c)
	return out, err
}

// Notifications returns bucket's notification configurations, in the
// order they were added.
func (s *Server) Notifications(bucket string) []NotificationConfig {
	s.notify.mu.RLock()
	defer s.notify.mu.RUnlock()
	out := make([]NotificationConfig, 0, len(s.notify.configs[bucket]))
	for _, c := range s.notify.configs[bucket] {
		out = append(out, c.clone())
	}
	return out
}

// insertNotification checks c and adds it to bucket. On an error,
// status is the HTTP status GCS answers with.
func (s *Server) insertNotification(bucket string, c NotificationConfig) (out NotificationConfig, status int, err error) {
	if !s.bucketExists(bucket) {
		return out, http.StatusNotFound, fmt.Errorf("The specified bucket does not exist.")
	}
	project, topic, ok := splitTopic(c.Topic)
	if !ok {
		return out, http.StatusBadRequest, fmt.Errorf("Invalid Google Cloud Pub/Sub topic. It should look like '//pubsub.googleapis.com/projects/*/topics/*'.")
	}
	c.Topic = topicPrefix + "projects/" + project + "/topics/" + topic
	if !s.topicExists("projects/" + project + "/topics/" + topic) {
		// GCS's answer to a topic that does not exist (or that it may
		// not publish to).
		return out, http.StatusBadRequest, fmt.Errorf("Cloud Pub/Sub topic '%s' not found, or user does not have permission to it.", c.Topic)
	}
	switch c.PayloadFormat {
	case "":
		c.PayloadFormat = PayloadJSON
	case PayloadJSON, PayloadNone:
	default:
		return out, http.StatusBadRequest, fmt.Errorf("Invalid payload format %q: it should be %s or %s.", c.PayloadFormat, PayloadJSON, PayloadNone)
	}
	for _, e := range c.EventTypes {
		switch e {
		case EventFinalize, EventMetadataUpdate, EventDelete, EventArchive:
		default:
			return out, http.StatusBadRequest, fmt.Errorf("Invalid event type %q.", e)
		}
	}
	s.notify.mu.Lock()
	defer s.notify.mu.Unlock()
	if len(s.notify.configs[bucket]) >= maxNotificationConfigs {
		return out, http.StatusBadRequest, fmt.Errorf("A bucket may have at most %d notification configurations.", maxNotificationConfigs)
	}
	s.notify.seq++
	c.ID = strconv.FormatInt(s.notify.seq, 10)
	c.Kind = "storage#notification"
	c.Etag = c.ID
	c.SelfLink = fmt.Sprintf("%s%s%s/notificationConfigs/%s", s.url, jsonPrefix, url.PathEscape(bucket), c.ID)
	c = c.clone()
	s.notify.configs[bucket] = append(s.notify.configs[bucket], c)
	s.notify.count.Add(1)
	return c.clone(), 0, nil
}

// dropNotifications forgets the configurations of a deleted bucket.
func (s *Server) dropNotifications(bucket string) {
	s.notify.mu.Lock()
	defer s.notify.mu.Unlock()
	s.notify.count.Add(-int64(len(s.notify.configs[bucket])))
	delete(s.notify.configs, bucket)
}

// serveNotificationConfigs answers r if it is a notificationConfigs call
// (POST and GET .../b/BUCKET/notificationConfigs, GET and DELETE
// .../notificationConfigs/ID), and reports whether it was.
func (s *Server) serveNotificationConfigs(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), jsonPrefix)
	if !ok {
		return false
	}
	bucketEsc, call, _ := strings.Cut(rest, "/")
	call, ok = strings.CutPrefix(call, "notificationConfigs")
	if !ok || (call != "" && call[0] != '/') {
		return false
	}
	bucket, id := unescape(bucketEsc), unescape(strings.TrimPrefix(call, "/"))
	switch {
	case id == "" && r.Method == http.MethodPost:
		var c NotificationConfig
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err == nil {
			err = json.Unmarshal(body, &c)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "Invalid notification configuration: "+err.Error())
			return true
		}
		out, status, err := s.insertNotification(bucket, c)
		if err != nil {
			writeError(w, status, err.Error())
			return true
		}
		writeJSON(w, out)
	case id == "" && r.Method == http.MethodGet:
		if !s.bucketExists(bucket) {
			writeError(w, http.StatusNotFound, "The specified bucket does not exist.")
			return true
		}
		writeJSON(w, map[string]any{"kind": "storage#notifications", "items": s.Notifications(bucket)})
	case id != "" && r.Method == http.MethodGet:
		for _, c := range s.Notifications(bucket) {
			if c.ID == id {
				writeJSON(w, c)
				return true
			}
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("Notification configuration %s not found.", id))
	case id != "" && r.Method == http.MethodDelete:
		if !s.deleteNotification(bucket, id) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("Notification configuration %s not found.", id))
			return true
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusMethodNotAllowed, "emulator: unsupported notificationConfigs call")
	}
	return true
}

// deleteNotification removes configuration id of bucket and reports
// whether there was one.
func (s *Server) deleteNotification(bucket, id string) bool {
	s.notify.mu.Lock()
	defer s.notify.mu.Unlock()
	cfgs := s.notify.configs[bucket]
	i := slices.IndexFunc(cfgs, func(c NotificationConfig) bool { return c.ID == id })
	if i < 0 {
		return false
	}
	s.notify.configs[bucket] = slices.Delete(cfgs, i, i+1)
	s.notify.count.Add(-1)
	return true
}

// matchingConfigs returns copies of bucket's configurations that an
// event of type event on object name goes to.
func (s *Server) matchingConfigs(bucket, event, name string) []NotificationConfig {
	s.notify.mu.RLock()
	defer s.notify.mu.RUnlock()
	var out []NotificationConfig
	for i := range s.notify.configs[bucket] {
		if c := &s.notify.configs[bucket][i]; c.matches(event, name) {
			out = append(out, c.clone())
		}
	}
	return out
}

// notifying reports whether bucket has notification configurations:
// only then are its changes watched.
func (s *Server) notifying(bucket string) bool {
	if s.notify.count.Load() == 0 {
		return false
	}
	s.notify.mu.RLock()
	defer s.notify.mu.RUnlock()
	return len(s.notify.configs[bucket]) > 0
}
