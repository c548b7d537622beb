package recovery

import (
	"slices"
	"testing"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
)

// changed describes data file id as name's record with local content.
func changed(name string, id uint64) *durable.Description {
	return &durable.Description{V: 1, ID: id, Name: name, Dirty: true, Complete: true}
}

func names(fs []diskFile) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.name)
	}
	slices.Sort(out)
	return out
}

func lostNames(ls []lostFile) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.f.name)
	}
	slices.Sort(out)
	return out
}

// TestPlanOrphans: each rule of the plan, on files made up in memory. No
// file that may hold bytes not in the bucket is removed.
func TestPlanOrphans(t *testing.T) {
	recs := map[string]durable.Record{
		"named": {ID: 0x1},
		"older": {ID: 0x2, Dirty: true, Complete: true}, // local content, unseated by 0x9
	}
	files := []diskFile{
		{name: "1", id: 0x1, dev: 1, ino: 1, blocks: 8},
		{name: "3", id: 0x3, dev: 1, ino: 1, blocks: 8}, // another link of a named inode
		{name: ".probe-x", dev: 1, ino: 2},
		{name: "notes.txt", dev: 1, ino: 3, blocks: 8},
		{name: "4", id: 0x4, dev: 1, ino: 4, blocks: 8},                                            // undescribed, holds bytes
		{name: "5", id: 0x5, dev: 1, ino: 5},                                                       // undescribed, empty
		{name: "6", id: 0x6, dev: 1, ino: 6, blocks: 8, desc: &durable.Description{V: 1, ID: 0x6}}, // clean
		{name: "7", id: 0x7, dev: 1, ino: 7, blocks: 8, desc: changed("a", 0x7)},
		{name: "8", id: 0x8, dev: 1, ino: 8, blocks: 8, desc: changed("a", 0x8)}, // newest of "a"
		{name: "9", id: 0x9, dev: 1, ino: 9, blocks: 8, desc: changed("older", 0x9)},
	}
	p := planOrphans(recs, files, 4096)
	p.unseated()
	if got := p.MaxID; got != 0x9 {
		t.Errorf("MaxID = %#x, want 0x9", got)
	}
	if r, ok := p.Adopt["a"]; !ok || r.ID != 0x8 {
		t.Errorf("adopted a = %+v, %v; want ID 8", r, ok)
	}
	if r, ok := p.Adopt["older"]; !ok || r.ID != 0x9 {
		t.Errorf("adopted older = %+v, %v; want ID 9", r, ok)
	}
	if len(p.Adopt) != 2 {
		t.Errorf("adopted %v, want a and older", p.Adopt)
	}
	if got, want := names(p.remove), []string{".probe-x", "3", "5", "6"}; !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	if got, want := lostNames(p.lost), []string{"2", "4", "7", "notes.txt"}; !slices.Equal(got, want) {
		t.Errorf("lost+found %v, want %v", got, want)
	}
	if p.Drops() != len(p.remove) || p.ForLostFound() != len(p.lost) {
		t.Errorf("Drops, ForLostFound = %d, %d", p.Drops(), p.ForLostFound())
	}
	if changed, deleted, other := p.CountAdopted(); changed != 2 || deleted != 0 || other != 0 {
		t.Errorf("CountAdopted = %d, %d, %d; want 2, 0, 0", changed, deleted, other)
	}
	if got := undescribed(files); !got[0x1] || !got[0x3] || !got[0x4] || !got[0x5] || len(got) != 4 {
		t.Errorf("undescribed = %v, want 1, 3, 4 and 5", got)
	}
}
