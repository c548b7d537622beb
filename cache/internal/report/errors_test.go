package report

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// The ring keeps the last MaxRecentErrors events in the order they were
// noted, and what Events returns is a copy.
func TestRecentErrors(t *testing.T) {
	var r RecentErrors
	if ev := r.Events(); ev != nil {
		t.Fatalf("an empty ring gave %v, want nil", ev)
	}
	before := time.Now()
	r.Note("upload", "a", errors.New("refused"))
	ev := r.Events()
	if len(ev) != 1 || ev[0].Op != "upload" || ev[0].Object != "a" || ev[0].Err != "refused" ||
		ev[0].Time.Before(before) || ev[0].Time.After(time.Now()) {
		t.Fatalf("one event noted, got %+v", ev)
	}
	ev[0].Object = "changed"
	if r.Events()[0].Object != "a" {
		t.Error("changing what Events returned changed the ring")
	}

	const noted = 2*MaxRecentErrors + 5
	for i := 1; i < noted; i++ {
		r.Note("check", fmt.Sprint(i), errors.New("bad"))
		ev := r.Events()
		want := min(i+1, MaxRecentErrors)
		if len(ev) != want {
			t.Fatalf("%d events noted, %d kept, want %d", i+1, len(ev), want)
		}
		if last := ev[len(ev)-1].Object; last != fmt.Sprint(i) {
			t.Fatalf("%d events noted, the newest is %s, want %d", i+1, last, i)
		}
	}
	ev = r.Events()
	for k, e := range ev {
		if want := fmt.Sprint(noted - MaxRecentErrors + k); e.Object != want {
			t.Fatalf("event %d of the kept ones is %s, want %s (oldest first): %+v", k, e.Object, want, ev)
		}
	}
}

func TestIsCancel(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{context.Canceled, true},
		{fmt.Errorf("reading: %w", context.Canceled), true},
		{context.DeadlineExceeded, false},
		{errors.New("canceled"), false},
		{nil, false},
	} {
		if got := IsCancel(c.err); got != c.want {
			t.Errorf("IsCancel(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// Order sorts Held and Refused by name and Dirty oldest first, ties by
// name, and keeps the first maxDirty dirty files.
func TestStatusOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := Status{
		Held:    []HeldFile{{Name: "c"}, {Name: "a"}, {Name: "b"}},
		Refused: []RefusedFile{{Name: "y"}, {Name: "x"}},
		Dirty: []DirtyFile{
			{Name: "late", Since: t0.Add(time.Hour)},
			{Name: "b", Since: t0},
			{Name: "a", Since: t0},
			{Name: "mid", Since: t0.Add(time.Minute)},
		},
	}
	s.Order(3)
	var got []string
	for _, h := range s.Held {
		got = append(got, h.Name)
	}
	for _, r := range s.Refused {
		got = append(got, r.Name)
	}
	for _, d := range s.Dirty {
		got = append(got, d.Name)
	}
	if fmt.Sprint(got) != "[a b c x y a b mid]" {
		t.Errorf("ordered: held, refused, dirty = %v; want [a b c x y a b mid]", got)
	}

	empty := Status{}
	empty.Order(0)
	if empty.Dirty != nil || empty.Held != nil || empty.Refused != nil {
		t.Errorf("ordering empty lists made %+v", empty)
	}
}
