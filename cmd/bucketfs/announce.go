package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/api/option"

	bfs "github.com/bucketfs/bucketfs/fs"
	"github.com/bucketfs/bucketfs/fs/names"
	"github.com/bucketfs/bucketfs/internal/control"
	"github.com/bucketfs/bucketfs/internal/notify"
	"github.com/bucketfs/bucketfs/internal/testhook"
)

// The bucket's change notifications (--notify-topic, --notify-
// subscription): each change made elsewhere is applied as it is
// announced (fs.Announce), and while they are live what the mount knows
// is trusted past --metadata-ttl (names.Cache.Trust). When they go down
// (internal/notify says why), the TTL holds again at once; when they are
// back, what was known before is asked again on its next use.

// announcements is the mount's subscriber, if any; operations.status
// reads its state.
type announcements struct {
	sub    atomic.Pointer[notify.Subscriber]
	failed atomic.Pointer[control.Status] // the start failed: when and why (NotifySince, NotifyWhy)
}

// startAnnouncements subscribes to the bucket's notifications, if the
// mount was asked to, and applies them to fsys. It returns nil (and no
// error) if not asked.
func startAnnouncements(ctx context.Context, c *mountConfig, mnt string, fsys *bfs.FS, ops *operations, log *slog.Logger) (*notify.Subscriber, error) {
	if c.notifyTopic == "" && c.notifySubscription == "" {
		return nil, nil
	}
	n := ops.m.Notify()
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var opts []option.ClientOption
	if c.anonymous && os.Getenv("PUBSUB_EMULATOR_HOST") == "" {
		opts = append(opts, option.WithoutAuthentication())
	}
	apply := func(ev notify.Event) {
		an := names.Announcement{Object: ev.Object.OrName(ev.Name, ev.Generation), Deleted: ev.Gone(), Full: ev.Object != nil, Meta: ev.Type == notify.MetadataUpdate}
		out, _ := fsys.Announce(an)
		log.Debug("notification", "type", ev.Type, "object", ev.Name, "generation", ev.Generation, "outcome", outcomeName(out))
		lag := time.Duration(-1)
		if !ev.Time.IsZero() {
			lag = time.Since(ev.Time)
		}
		n.Event(outcomeName(out), lag)
	}
	fsys.TrustNames(false, time.Time{})
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sub, err := notify.Start(sctx, notify.Options{
		Topic: c.notifyTopic, Subscription: c.notifySubscription, Bucket: c.bucket,
		Host: host, Mountpoint: mnt, ClientOptions: opts, Logger: log,
		CheckEvery: testhook.Duration("notify.check-every", 0), // tests check more often
		Silence:    testhook.Duration("notify.silence", 0),
		Apply:      apply,
		OnState: func(st notify.State) {
			n.SetLive(st.Live)
			// Since the state changed: answers asked before a break may
			// have missed announcements.
			fsys.TrustNames(st.Live, st.Since)
		},
	})
	if err != nil {
		n.SetLive(false)
		ops.notify.failed.Store(&control.Status{NotifySince: time.Now(), NotifyWhy: err.Error()})
		return nil, err
	}
	ops.notify.sub.Store(sub)
	fsys.OnOwnUpload(sub.Expect)
	return sub, nil
}

// stopAnnouncements stops the subscriber and deletes the mount's own
// subscription (a clean unmount).
func stopAnnouncements(sub *notify.Subscriber, fsys *bfs.FS, log *slog.Logger) {
	if sub == nil {
		return
	}
	fsys.OnOwnUpload(nil)
	fsys.TrustNames(false, time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sub.Close(ctx); err != nil {
		log.Warn("notifications: stopping", "err", err)
	}
}

// outcomeName is an outcome's metrics label.
func outcomeName(o names.Outcome) string {
	switch o {
	case names.Applied:
		return "applied"
	case names.Stale:
		return "stale"
	}
	return "duplicate"
}

// notifyState fills in the notifications' state for 'bucketfs status'.
func (o *operations) notifyState(st *control.Status) {
	sub := o.notify.sub.Load()
	if f := o.notify.failed.Load(); f != nil {
		st.NotifyOn, st.NotifySince, st.NotifyWhy = true, f.NotifySince, f.NotifyWhy
		return
	}
	if sub == nil {
		return
	}
	s := sub.State()
	st.NotifyOn, st.NotifyLive, st.NotifySince, st.NotifyWhy, st.NotifySubscription = true, s.Live, s.Since, s.Why, s.Subscription
}

// printNotifyState writes the status line of the notifications.
func printNotifyState(w io.Writer, st control.Status, now time.Time) {
	switch {
	case !st.NotifyOn:
		fmt.Fprintf(w, "notify:      off (changes made elsewhere show after --metadata-ttl)\n")
	case st.NotifyLive:
		fmt.Fprintf(w, "notify:      live since %s (%s): changes made elsewhere show at once\n", st.NotifySince.Local().Format(time.DateTime), st.NotifySubscription)
	default:
		fmt.Fprintf(w, "notify:      DOWN since %s (%s ago): %s; changes made elsewhere show after --metadata-ttl\n",
			st.NotifySince.Local().Format(time.DateTime), now.Sub(st.NotifySince).Round(time.Second), st.NotifyWhy)
	}
}
