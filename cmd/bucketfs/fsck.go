package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/bucketfs/bucketfs/cache"
)

const fsckUsage = `Usage: bucketfs fsck --cache-dir DIR [--rebuild] [--json]

Checks an unmounted cache directory: the index (index.db, all of it), the
journal, and the data files against the index's records. It says what the
next mount would recover, drop, or move to DIR/lost+found. It refuses a cache
that a running mount uses.

With --rebuild, index.db is moved aside (index.db.old-TIME, or
index.db.corrupt-TIME if it is damaged) and a new one is built from the
descriptions the data files carry, with the journal's changes on top. Nothing
that is not in the bucket is deleted.

Flags:
`

type fsckConfig struct {
	dir     string
	rebuild bool
	jsonOut bool
}

func parseFsckArgs(args []string) (*fsckConfig, error) {
	c := &fsckConfig{}
	fl := flag.NewFlagSet("fsck", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	fl.StringVar(&c.dir, "cache-dir", "", "the cache directory to check (required)")
	fl.BoolVar(&c.rebuild, "rebuild", false, "move index.db aside and rebuild it from the data files")
	fl.BoolVar(&c.jsonOut, "json", false, "print the report as JSON")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
			b.WriteString(fsckUsage)
			fl.VisitAll(func(f *flag.Flag) { fmt.Fprintf(&b, "  --%-10s %s\n", f.Name, f.Usage) })
			fmt.Print(b.String())
			return nil, flag.ErrHelp
		}
		return nil, &usageError{err.Error()}
	}
	if fl.NArg() > 0 {
		return nil, &usageError{fmt.Sprintf("fsck takes no arguments, got %q", fl.Args())}
	}
	if c.dir == "" {
		return nil, &usageError{"fsck needs --cache-dir DIR"}
	}
	return c, nil
}

// runFsck is 'bucketfs fsck'. It fails (status 1) if the index is damaged
// and not rebuilt, or if files would go to lost+found.
func runFsck(args []string) error {
	c, err := parseFsckArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	rep, err := cache.Fsck(c.dir, cache.FsckOptions{Rebuild: c.rebuild})
	if err != nil {
		return fmt.Errorf("fsck of %s: %w", c.dir, err)
	}
	if c.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printFsck(os.Stdout, rep)
	}
	switch {
	case rep.IndexDamage != "" && rep.MovedAside == "":
		return fmt.Errorf("the cache index is damaged; rebuild it with: bucketfs fsck --cache-dir %s --rebuild", c.dir)
	case len(rep.WouldLostFound) > 0:
		return fmt.Errorf("%d cache files cannot be placed: the next mount moves them to %s/lost+found", len(rep.WouldLostFound), c.dir)
	case len(rep.Held) > 0:
		return fmt.Errorf("%d changed files fail their checksum check: the mount holds them until 'bucketfs resolve MOUNTPOINT FILE --keep-local|--take-bucket'", len(rep.Held))
	case len(rep.BadCopies) > 0:
		return fmt.Errorf("%d cached copies fail their checksum check: the next mount fetches their bad chunks again", len(rep.BadCopies))
	}
	return nil
}

func printFsck(w io.Writer, r cache.FsckReport) {
	fmt.Fprintf(w, "cache dir:   %s\n", r.Dir)
	switch {
	case r.IndexMissing:
		fmt.Fprintf(w, "index:       missing (the next mount rebuilds it from the data files)\n")
	case r.IndexDamage != "":
		fmt.Fprintf(w, "index:       DAMAGED: %s\n", r.IndexDamage)
	default:
		fmt.Fprintf(w, "index:       sound\n")
	}
	fmt.Fprintf(w, "journal:     %d changes not yet in the index\n", r.JournalOps)
	fmt.Fprintf(w, "records:     %d; %d changed files, %d deletions and %d other changes not yet in the bucket\n",
		r.Records, r.ChangedFiles, r.Deletions, r.OtherPending)
	fmt.Fprintf(w, "data files:  %d without a record (%d to recover, %d to drop, %d for lost+found); %d without a description\n",
		r.FilesNoRecord, len(r.WouldAdopt), r.WouldRemove, len(r.WouldLostFound), r.NoDescription)
	for _, n := range r.RecordsNoFile {
		fmt.Fprintf(w, "  record without a file: %s\n", n)
	}
	for _, n := range r.WouldAdopt {
		fmt.Fprintf(w, "  to recover from its description: %s\n", n)
	}
	for _, n := range r.WouldLostFound {
		fmt.Fprintf(w, "  for lost+found: %s\n", n)
	}
	fmt.Fprintf(w, "checksums:   %d copies checked; %d cached copies bad (fetched again at the next mount), %d changed files held\n",
		r.CheckedCopies, len(r.BadCopies), len(r.Held))
	for _, n := range r.BadCopies {
		fmt.Fprintf(w, "  bad copy: %s\n", n)
	}
	for _, n := range r.Held {
		fmt.Fprintf(w, "  HELD: %s\n", n)
	}
	if r.MovedAside != "" {
		fmt.Fprintf(w, "rebuilt:     index moved to %s; the new one has %d records from the data files' descriptions\n", r.MovedAside, r.Rebuilt)
	} else if r.IndexMissing && r.Rebuilt > 0 {
		fmt.Fprintf(w, "rebuilt:     %d records from the data files' descriptions\n", r.Rebuilt)
	}
}
