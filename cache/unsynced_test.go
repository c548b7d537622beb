package cache

import (
	"testing"
)

// A download whose file cannot be synced leaves none of its copy counted
// present (535eefd), in the journal too: a record written between the
// download's take (its chunks absorbed in memory) and the failed sync (a
// pin, here) claimed the chunks, and a crash then kept the claim for
// bytes the disk may not have.
func TestUnsyncedDownloadClaimsNothingInJournal(t *testing.T) {
	e, c, data := fetchEnv(t)
	a := e.put("big", data)
	h := e.openHandle(c, a)
	buf := make([]byte, 100)
	if _, err := h.ReadAt(e.ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	en := c.entries["big"]
	dl, f := c.takeDownloadLocked(en) // as the last release takes it
	present := en.Rec.PresentBools()[0]
	c.mu.Unlock()
	if dl == nil || !present {
		t.Fatalf("no download taken (%v), or chunk 0 not absorbed (%v)", dl, present)
	}
	c.setPin(en, true) // a record written meanwhile: it names chunk 0 present
	f.Close()          // its Sync fails
	c.fetcher.Retire(fillLedger{c, en}, "big", dl, f)
	c.mu.Lock()
	present = en.Rec.PresentBools()[0]
	c.mu.Unlock()
	if present {
		t.Fatal("chunk 0 still present in memory after the failed sync")
	}
	h.Close()
	c.crash()
	if got := records(t, e.dir)["big"]; got.PresentBools()[0] {
		t.Errorf("after a crash the record names chunk 0 present (complete %v), whose sync failed", got.Complete)
	}
}
