package main

import (
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/control"
)

// bucketfs status says whether the bucket's notifications are off, live
// or down, and why.
func TestPrintStatusNotify(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		st   control.Status
		want []string
	}{
		{control.Status{}, []string{"notify:      off", "--metadata-ttl"}},
		{control.Status{NotifyOn: true, NotifyLive: true, NotifySince: now.Add(-time.Minute), NotifySubscription: "projects/p/subscriptions/s"},
			[]string{"notify:      live since", "projects/p/subscriptions/s", "show at once"}},
		{control.Status{NotifyOn: true, NotifySince: now.Add(-2 * time.Minute), NotifyWhy: "the subscription projects/p/subscriptions/s is gone"},
			[]string{"notify:      DOWN since", "(2m0s ago)", "is gone", "after --metadata-ttl"}},
	} {
		var b strings.Builder
		c.st.Bucket, c.st.Started = "b", now.Add(-time.Hour)
		printStatus(&b, c.st, now)
		for _, want := range c.want {
			if !strings.Contains(b.String(), want) {
				t.Errorf("status lacks %q:\n%s", want, b.String())
			}
		}
	}
}
